package client

import (
	"context"
	"slices"
	"strings"
	"testing"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// The brokers asked are the bootstrap ones, then those the last answer
// named (so the bootstrap ones may all go), each once, starting after the
// one that answered last.
func TestBootstrapCandidatesLearnTheCluster(t *testing.T) {
	s := &bootstrapSource{addrs: []string{"h1:1", "h2:2"}}
	if all, start := s.candidates(); !slices.Equal(all, []string{"h1:1", "h2:2"}) || start != 0 {
		t.Fatalf("before any answer: %v from %d", all, start)
	}
	s.answered(0, []*replicadv1.Broker{{Id: 1, Host: "h1", Port: 1}, {Id: 3, Host: "h3", Port: 3}, {Id: 4, Host: "h4", Port: 4}})
	if all, start := s.candidates(); !slices.Equal(all, []string{"h1:1", "h2:2", "h3:3", "h4:4"}) || start != 1 {
		t.Fatalf("after h1 named h1, h3, h4: %v from %d, want the bootstrap ones then h3, h4, from h2", all, start)
	}
	// The next answer replaces what was learned; the start wraps around.
	s.answered(3, []*replicadv1.Broker{{Id: 5, Host: "h5", Port: 5}})
	if all, start := s.candidates(); !slices.Equal(all, []string{"h1:1", "h2:2", "h5:5"}) || start != 1 {
		t.Fatalf("after h4 named h5: %v from %d, want h1, h2, h5 from index 4 mod 3 = 1", all, start)
	}
}

// failingSource is a leader source whose every lookup fails and names no
// broker, as a controller refusing the caller does.
type failingSource struct{ err error }

func (f failingSource) Lookup(context.Context, *Client, TopicPartition) (LeaderView, error) {
	return LeaderView{}, f.err
}

// An InitProducerID with no broker known and a lookup that names none says
// why the lookup failed, not "no broker answered: %!w(<nil>)".
func TestInitProducerIDSaysWhyNoBroker(t *testing.T) {
	c, err := New(Config{Leaders: failingSource{&LookupError{Msg: "the controller does not describe the cluster to this certificate"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, err = c.InitProducerID(context.Background(), 0, 0)
	if err == nil || !strings.Contains(err.Error(), "does not describe the cluster") || strings.Contains(err.Error(), "%!") {
		t.Fatalf("InitProducerID: %v", err)
	}
}
