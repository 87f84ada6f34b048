package main

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// outputWidth is the width lines should fit in: $COLUMNS when set, else the
// terminal's when w is one; 0 (no limit) for a pipe or a file.
func outputWidth(w io.Writer) int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 {
		return 0
	}
	return int(ws.Col)
}

// fitWriter cuts each line written through it at width characters, ending
// a cut one with "…", so a trace's long attribute lists do not wrap into an
// unreadable block (trace --wide prints them whole).
type fitWriter struct {
	w     io.Writer
	width int
	buf   []byte
}

func (f *fitWriter) Write(p []byte) (int, error) {
	f.buf = append(f.buf, p...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		if _, err := f.w.Write(append(fitLine(f.buf[:i], f.width), '\n')); err != nil {
			return 0, err
		}
		f.buf = f.buf[i+1:]
	}
}

// flush writes a last line that has no newline.
func (f *fitWriter) flush() {
	if len(f.buf) > 0 {
		_, _ = f.w.Write(fitLine(f.buf, f.width))
		f.buf = nil
	}
}

// fitLine is line cut to width characters (runes), "…" last when cut.
func fitLine(line []byte, width int) []byte {
	if utf8.RuneCount(line) <= width {
		return bytes.Clone(line)
	}
	out := make([]byte, 0, width*2)
	n := 0
	for len(line) > 0 && n < width-1 {
		_, size := utf8.DecodeRune(line)
		out = append(out, line[:size]...)
		line = line[size:]
		n++
	}
	return append(out, "…"...)
}
