// Package syncbuf is a bytes.Buffer safe for concurrent use: the sink of a
// logger or a process's output that a test reads while other goroutines
// write it.
package syncbuf
