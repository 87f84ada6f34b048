package producerstate

import (
	"errors"
	"testing"

	"github.com/replicad/replicad/core/record"
)

func sample() *Manager {
	m := NewManager(0)
	for id := int64(1); id <= 3; id++ {
		for s := int32(0); s < int32(id)*3; s++ {
			off := int64(s)*10 + id
			m.Apply(id, int16(id), Batch{FirstSeq: s, LastSeq: s, FirstOffset: off, LastOffset: off, MaxTimestamp: 1000 + off})
		}
	}
	return m
}

func TestSnapshotRoundTrip(t *testing.T) {
	m := sample()
	data := m.Encode(77)
	got, err := Decode(data, 77, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(m) || got.Get(3).n != MaxBatches {
		t.Fatalf("decoded %+v, want %+v", got.Describe(0), m.Describe(0))
	}
	empty, err := Decode(NewManager(0).Encode(0), 0, 0)
	if err != nil || empty.Len() != 0 {
		t.Fatalf("empty snapshot: %v, %d producers", err, empty.Len())
	}
	if _, err := Decode(data, 78, 0); !errors.Is(err, ErrBadSnapshot) {
		t.Fatalf("named for another offset: %v", err)
	}
	// Every single-byte flip and every truncation is refused.
	for i := range data {
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x40
		if _, err := Decode(bad, 77, 0); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
		if _, err := Decode(data[:i], 77, 0); !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("cut at %d: %v", i, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(sample().Encode(5))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Decode(data, 5, 0)
		if err == nil {
			if again, err := Decode(m.Encode(5), 5, 0); err != nil || !again.Equal(m) {
				t.Fatalf("re-encoded snapshot differs: %v", err)
			}
		}
	})
}

func TestCheckLeavesStateUnchanged(t *testing.T) {
	m := sample()
	before := m.Clone()
	for _, p := range []record.Producer{{ID: 1, Epoch: 1, BaseSequence: 3}, {ID: 1, Epoch: 0, BaseSequence: 0}, {ID: 1, Epoch: 2, BaseSequence: 0}, {ID: 9, BaseSequence: 0}} {
		_, _ = m.Check(p, p.BaseSequence)
	}
	if !m.Equal(before) {
		t.Fatal("Check changed the state")
	}
}

func TestFollowerApplyTakesWhateverEpoch(t *testing.T) {
	m := NewManager(0)
	m.Apply(1, 5, Batch{FirstSeq: 0, LastSeq: 0})
	m.Apply(1, 5, Batch{FirstSeq: 1, LastSeq: 1, FirstOffset: 1, LastOffset: 1})
	// A replica applies what its log holds, even an older epoch (after an
	// unclean election the log is the truth): the batches restart with it.
	m.Apply(1, 3, Batch{FirstSeq: 7, LastSeq: 7, FirstOffset: 2, LastOffset: 2})
	if e := m.Get(1); e.Epoch != 3 || len(e.Batches()) != 1 || e.Last().FirstSeq != 7 {
		t.Fatalf("entry %+v", e)
	}
}
