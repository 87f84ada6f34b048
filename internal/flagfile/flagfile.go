package flagfile

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Options tune Apply.
type Options struct {
	// Repeatable names the flags a YAML list gives once per item; any other
	// flag gets a list joined with commas.
	Repeatable []string
	// Refused names flags that make no sense in a file (config itself,
	// version): they are unknown keys there.
	Refused []string
}

// Apply reads the YAML file at path and sets, through fs.Set, every flag it
// names that the command line did not set (fs must be parsed). Errors
// name the file, the line and the key.
func Apply(fs *flag.FlagSet, path string, opts Options) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	entries, err := Parse(data, opts)
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	// A duration in the file gets the command line's hint ("did you mean 5s?").
	restore := hintDurations(fs)
	defer restore()
	onCommandLine := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { onCommandLine[f.Name] = true })
	for _, e := range entries {
		if fs.Lookup(e.Key) == nil || slices.Contains(opts.Refused, e.Key) {
			return fmt.Errorf("--config %s:%d: unknown key %q (the keys are %s's flag names, without dashes)", path, e.Line, e.Key, fs.Name())
		}
		if onCommandLine[e.Key] {
			continue
		}
		for _, v := range e.Values {
			if err := fs.Set(e.Key, v); err != nil {
				return fmt.Errorf("--config %s:%d: %s: invalid value %q: %v", path, e.Line, e.Key, v, err)
			}
		}
	}
	return nil
}

// Entry is one key of the file with the values to Set, in order.
type Entry struct {
	Key    string
	Values []string
	Line   int
}

// Parse reads the YAML document in data: a mapping of flag names to
// scalars or lists of scalars, in file order. An empty file is no entries.
func Parse(data []byte, opts Options) ([]Entry, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("want one YAML document, found more")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("want a YAML mapping of flag names to values")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping of flag names to values", root.Line)
	}
	var entries []Entry
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: a key must be a flag name", k.Line)
		}
		key := k.Value
		if first, dup := seen[key]; dup {
			return nil, fmt.Errorf("line %d: %s given twice (first on line %d)", k.Line, key, first)
		}
		seen[key] = k.Line
		e := Entry{Key: key, Line: k.Line}
		switch v.Kind {
		case yaml.ScalarNode:
			if v.Tag == "!!null" {
				return nil, fmt.Errorf("line %d: %s: no value (leave the key out for the default)", v.Line, key)
			}
			e.Values = []string{v.Value}
		case yaml.SequenceNode:
			var items []string
			for _, item := range v.Content {
				if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
					return nil, fmt.Errorf("line %d: %s: a list holds plain values", item.Line, key)
				}
				items = append(items, item.Value)
			}
			if slices.Contains(opts.Repeatable, key) {
				e.Values = items
			} else {
				e.Values = []string{strings.Join(items, ",")}
			}
		default:
			return nil, fmt.Errorf("line %d: %s: want a value or a list of values", v.Line, key)
		}
		entries = append(entries, e)
	}
	return entries, nil
}
