package checkpoint

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/replicad/replicad/core/tp"
)

// ParseError says where and why a checkpoint file does not parse. It matches
// ErrMalformed with errors.Is.
type ParseError struct {
	Path   string
	Line   int // 1-based
	Reason string
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s: %s line %d: %s", ErrMalformed, e.Path, e.Line, e.Reason)
}

func (e *ParseError) Unwrap() error { return ErrMalformed }

// lineReader yields the lines of a file the way Java's readLine does: a final
// newline does not start another line, but an empty line before it counts.
type lineReader struct {
	path string
	rest string
	line int // number of the line last returned
}

func (r *lineReader) next() (string, bool) {
	if r.rest == "" {
		return "", false
	}
	r.line++
	i := strings.IndexByte(r.rest, '\n')
	if i < 0 {
		s := r.rest
		r.rest = ""
		return s, true
	}
	s := r.rest[:i]
	r.rest = r.rest[i+1:]
	return s, true
}

func (r *lineReader) errorf(format string, args ...any) error {
	return &ParseError{Path: r.path, Line: r.line, Reason: fmt.Sprintf(format, args...)}
}

// header reads the version and entry-count lines and returns the count.
func (r *lineReader) header() (int, error) {
	v, ok := r.next()
	if !ok {
		r.line++
		return 0, r.errorf("empty file, want version %d", Version)
	}
	if n, err := parseNonNegative(v, 31); err != nil || n != Version {
		return 0, r.errorf("version %q, want %d", v, Version)
	}
	c, ok := r.next()
	if !ok {
		r.line++
		return 0, r.errorf("missing entry count")
	}
	n, err := parseNonNegative(c, 31)
	if err != nil {
		return 0, r.errorf("entry count %q: %v", c, err)
	}
	return int(n), nil
}

// entry reads entry i (0-based) of count and splits it into exactly len(dst)
// fields separated by one space.
func (r *lineReader) entry(i, count int, dst []string) error {
	s, ok := r.next()
	if !ok {
		r.line++
		return r.errorf("file ends after %d of %d entries", i, count)
	}
	for j := range dst {
		if j == len(dst)-1 {
			dst[j] = s
			break
		}
		k := strings.IndexByte(s, ' ')
		if k < 0 {
			return r.errorf("%d fields, want %d", j+1, len(dst))
		}
		dst[j], s = s[:k], s[k+1:]
	}
	if strings.IndexByte(dst[len(dst)-1], ' ') >= 0 {
		return r.errorf("more than %d fields", len(dst))
	}
	return nil
}

// end fails when anything follows the last entry.
func (r *lineReader) end(count int) error {
	if _, ok := r.next(); ok {
		return r.errorf("trailing data after %d entries", count)
	}
	return nil
}

func parseOffsets(path string, data []byte) (map[tp.TopicPartition]int64, error) {
	r := &lineReader{path: path, rest: string(data)}
	count, err := r.header()
	if err != nil {
		return nil, err
	}
	// A corrupt count must not make us allocate gigabytes.
	out := make(map[tp.TopicPartition]int64, min(count, len(data)/6))
	var f [3]string
	topic := ""
	for i := range count {
		if err := r.entry(i, count, f[:]); err != nil {
			return nil, err
		}
		if f[0] != topic || topic == "" {
			if err := tp.ValidateTopic(f[0]); err != nil {
				return nil, r.errorf("%v", err)
			}
			// A copy, so the map does not pin the whole file in memory;
			// sorted files reuse it for every partition of the topic.
			topic = strings.Clone(f[0])
		}
		p, err := parseNonNegative(f[1], 31)
		if err != nil {
			return nil, r.errorf("partition %q: %v", f[1], err)
		}
		off, err := parseNonNegative(f[2], 63)
		if err != nil {
			return nil, r.errorf("offset %q: %v", f[2], err)
		}
		k := tp.TopicPartition{Topic: topic, Partition: int32(p)}
		if _, dup := out[k]; dup {
			return nil, r.errorf("duplicate entry for %s", k)
		}
		out[k] = off
	}
	if err := r.end(count); err != nil {
		return nil, err
	}
	return out, nil
}

func parseEpochs(path string, data []byte) ([]EpochEntry, error) {
	r := &lineReader{path: path, rest: string(data)}
	count, err := r.header()
	if err != nil {
		return nil, err
	}
	out := make([]EpochEntry, 0, min(count, len(data)/4))
	seen := make(map[int32]struct{}, cap(out))
	var f [2]string
	for i := range count {
		if err := r.entry(i, count, f[:]); err != nil {
			return nil, err
		}
		e, err := parseNonNegative(f[0], 31)
		if err != nil {
			return nil, r.errorf("epoch %q: %v", f[0], err)
		}
		off, err := parseNonNegative(f[1], 63)
		if err != nil {
			return nil, r.errorf("start offset %q: %v", f[1], err)
		}
		if _, dup := seen[int32(e)]; dup {
			return nil, r.errorf("duplicate entry for epoch %d", e)
		}
		seen[int32(e)] = struct{}{}
		out = append(out, EpochEntry{Epoch: int32(e), StartOffset: off})
	}
	if err := r.end(count); err != nil {
		return nil, err
	}
	return out, nil
}

// parseNonNegative parses a decimal integer of at most bits bits (plus sign),
// rejecting signs other than a leading '-', which it reports as negative.
func parseNonNegative(s string, bits int) (int64, error) {
	if s == "" || s[0] == '+' {
		return 0, fmt.Errorf("not a number")
	}
	n, err := strconv.ParseInt(s, 10, bits+1)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("out of range")
		}
		return 0, fmt.Errorf("not a number")
	}
	if s[0] == '-' {
		return 0, fmt.Errorf("negative")
	}
	return n, nil
}
