package logmgr

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/vfs"
)

// metaVersion is the meta.properties version holding broker.id (Kafka's v0).
const metaVersion = "0"

// errBadMeta marks a meta.properties that does not parse: its dir goes offline.
var errBadMeta = errors.New("logmgr: malformed meta.properties")

// checkMeta makes sure dir belongs to brokerID: it writes meta.properties
// when missing (created: the dir is new to this broker) and fails with
// ErrOtherBroker when it names another broker.
func checkMeta(fsys vfs.FS, dir string, brokerID int32) (created bool, err error) {
	path := filepath.Join(dir, MetaPropertiesFile)
	data, err := fsys.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, writeMeta(fsys, path, brokerID)
	}
	if err != nil {
		return false, ioError("read meta.properties", err)
	}
	id, err := parseMeta(data)
	if err != nil {
		return false, fmt.Errorf("%w: %s: %v", errBadMeta, path, err)
	}
	if id != brokerID {
		return false, fmt.Errorf("%w: %s has broker.id %d, this broker is %d", ErrOtherBroker, dir, id, brokerID)
	}
	return false, nil
}

// writeMeta writes meta.properties atomically and durably: a dir whose
// ownership was not recorded could later be taken by another broker.
func writeMeta(fsys vfs.FS, path string, brokerID int32) error {
	data := "version=" + metaVersion + "\nbroker.id=" + strconv.FormatInt(int64(brokerID), 10) + "\n"
	if err := checkpoint.WriteFileAtomic(fsys, path, []byte(data), true); err != nil {
		return ioError("write meta.properties", err)
	}
	return nil
}

// parseProperties reads a Java properties file: "key=value" or "key:value"
// lines, with '#' and '!' comment lines and blank lines ignored.
func parseProperties(data []byte) (map[string]string, error) {
	props := make(map[string]string)
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		i := strings.IndexAny(line, "=:")
		if i < 0 {
			return nil, fmt.Errorf("line %q is not key=value", line)
		}
		props[strings.TrimSpace(line[:i])] = strings.TrimSpace(line[i+1:])
	}
	return props, nil
}

// parseMeta returns broker.id from meta.properties.
func parseMeta(data []byte) (int32, error) {
	props, err := parseProperties(data)
	if err != nil {
		return 0, err
	}
	if v, ok := props["version"]; !ok || v != metaVersion {
		return 0, fmt.Errorf("version %q, want %s", v, metaVersion)
	}
	s, ok := props["broker.id"]
	if !ok {
		return 0, fmt.Errorf("no broker.id")
	}
	id, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("broker.id %q is not a number", s)
	}
	return int32(id), nil
}
