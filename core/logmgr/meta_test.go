package logmgr

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Ensures Open creates missing log dirs with a meta.properties naming this broker.
func TestOpenCreatesDirsAndMetaProperties(t *testing.T) {
	dirs := tempDirs(t, 2)
	cfg := config(dirs...)
	cfg.BrokerID = 7
	m, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	for _, d := range dirs {
		if got := readFile(t, filepath.Join(d, MetaPropertiesFile)); got != "version=0\nbroker.id=7\n" {
			t.Fatalf("%s meta.properties = %q", d, got)
		}
		if info := dirInfo(t, m, d); !info.Online || info.Err != nil {
			t.Fatalf("dir %s: %+v, want online", d, info)
		}
	}
}

// Ensures a dir whose meta.properties names another broker makes Open fail with ErrOtherBroker, naming the dir and both ids.
func TestOpenRefusesOtherBrokersDir(t *testing.T) {
	dirs := tempDirs(t, 2)
	writeFile(t, filepath.Join(dirs[1], MetaPropertiesFile), "#Thu Nov 28\nbroker.id = 2\nversion=0\n")
	m, err := Open(config(dirs...))
	if err == nil {
		m.Shutdown()
		t.Fatal("Open succeeded on another broker's dir")
	}
	if !errors.Is(err, ErrOtherBroker) {
		t.Fatalf("err = %v, want ErrOtherBroker", err)
	}
	for _, want := range []string{dirs[1], "broker.id 2", "broker is 1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// Ensures an existing meta.properties of this broker is accepted and left as it was.
func TestOpenAcceptsOwnMetaProperties(t *testing.T) {
	dirs := tempDirs(t, 1)
	own := "#written by Kafka\nversion=0\nbroker.id=1\ncluster.id=abc\n"
	writeFile(t, filepath.Join(dirs[0], MetaPropertiesFile), own)
	m := open(t, dirs...)
	if !dirInfo(t, m, dirs[0]).Online {
		t.Fatal("dir offline")
	}
	if got := readFile(t, filepath.Join(dirs[0], MetaPropertiesFile)); got != own {
		t.Fatalf("meta.properties rewritten to %q", got)
	}
}

// Ensures an unparseable meta.properties takes only its dir offline.
func TestMalformedMetaPropertiesTakesDirOffline(t *testing.T) {
	for _, meta := range []string{"garbage\n", "version=1\nbroker.id=1\n", "version=0\n", "version=0\nbroker.id=x\n"} {
		dirs := tempDirs(t, 2)
		writeFile(t, filepath.Join(dirs[0], MetaPropertiesFile), meta)
		m := open(t, dirs...)
		bad, good := dirInfo(t, m, dirs[0]), dirInfo(t, m, dirs[1])
		if bad.Online || !errors.Is(bad.Err, errBadMeta) {
			t.Errorf("meta %q: dir %+v, want offline with errBadMeta", meta, bad)
		}
		if !good.Online {
			t.Errorf("meta %q: the other dir is offline: %+v", meta, good)
		}
	}
}

// Ensures Open fails with ErrNoOnlineDir when every dir is offline, and when none is configured.
func TestOpenNoOnlineDir(t *testing.T) {
	dirs := tempDirs(t, 2)
	writeFile(t, filepath.Join(dirs[0], MetaPropertiesFile), "garbage\n")
	// A file where the dir should be: it cannot be created.
	if err := os.WriteFile(dirs[1], nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(config(dirs...)); !errors.Is(err, ErrNoOnlineDir) {
		t.Fatalf("Open = %v, want ErrNoOnlineDir", err)
	}
	if _, err := Open(config()); !errors.Is(err, ErrNoOnlineDir) {
		t.Fatalf("Open without dirs = %v, want ErrNoOnlineDir", err)
	}
}

// Ensures a dir listed twice (after cleaning the path) is refused.
func TestOpenRefusesRepeatedDir(t *testing.T) {
	dirs := tempDirs(t, 1)
	if _, err := Open(config(dirs[0], dirs[0]+"/")); err == nil {
		t.Fatal("Open accepted one dir twice")
	}
}
