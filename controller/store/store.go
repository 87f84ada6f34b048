package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Sentinel errors. Implementations wrap them with context; test with errors.Is.
var (
	ErrNotFound = errors.New("store: not found")
	ErrExists   = errors.New("store: already exists")
	// ErrConflict: a compare-and-set found another epoch than expected;
	// nothing was written. Re-read and decide again.
	ErrConflict = errors.New("store: compare-and-set conflict")
	// ErrInvalid: the request itself is wrong (a caller bug); nothing was written.
	ErrInvalid = errors.New("store: invalid argument")
	ErrClosed  = errors.New("store: closed")
	// ErrNotLeader: this controller lost its election (etcd); nothing was
	// written, and the controller must stop acting at once.
	ErrNotLeader = errors.New("store: not the elected controller")
	// ErrUnknownOutcome: the write was sent but its answer never came (an
	// etcd "request timed out" or "leader changed", a deadline that passed
	// while the transaction was in flight): it may or may not have been
	// applied. The caller re-reads what it wrote before deciding again.
	// Not every such error wraps it: see IsDefinite.
	ErrUnknownOutcome = errors.New("store: outcome of the write unknown")
)

// IsDefinite reports whether a failed write is known to have written
// nothing: it failed with ErrConflict, ErrInvalid, ErrNotFound, ErrExists
// or ErrNotLeader, all of which a store answers only before or instead of
// applying the write. Any other error (a context's, a transport's,
// ErrUnknownOutcome, ErrClosed, which Close can cause after a transaction
// committed) leaves the outcome unknown: what the caller holds in memory may
// be behind the store, and only a read tells. nil is definite.
func IsDefinite(err error) bool {
	return err == nil || errors.Is(err, ErrConflict) || errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotFound) ||
		errors.Is(err, ErrExists) || errors.Is(err, ErrNotLeader)
}

// Elector is implemented by stores that several controllers share (etcd):
// only the controller holding the Leadership may write.
type Elector interface {
	// Campaign blocks until this controller is elected or ctx is done. From
	// then on the store's writes succeed only while the returned Leadership
	// holds; after it is lost they fail with ErrNotLeader.
	Campaign(ctx context.Context) (Leadership, error)
}

// Leadership is one won election.
type Leadership interface {
	// Done is closed when the leadership is lost (session expired, resigned,
	// or the store closed).
	Done() <-chan struct{}
	// Resign gives the leadership up so another controller takes over at once.
	Resign(ctx context.Context) error
}

// Broker is a registered broker.
type Broker struct {
	ID   int32  `json:"id"`
	Host string `json:"host"`
	Port int32  `json:"port"`
	// Epoch is assigned by RegisterBroker. Invariant: larger than the epoch
	// of every earlier registration of any broker, across store restarts.
	Epoch int64 `json:"epoch"`
	// Fenced: the broker's session expired; it leads nothing and may not
	// join an ISR until it registers again.
	Fenced bool `json:"fenced"`
	// MinInsyncReplicas is the broker's --min-insync-replicas, as it
	// registered (0: not told, taken as 1). A leader does not move its HW
	// while its ISR is smaller than that, which is what lets the
	// controller keep replicas that left a small ISR as eligible leaders
	// (Partition.ELR).
	MinInsyncReplicas int32 `json:"min_insync_replicas,omitempty"`
	// MaxPartitions is the broker's --max-partitions, as it registered:
	// the most replicas the controller assigns it (0: not told, no budget).
	MaxPartitions int32 `json:"max_partitions,omitempty"`
}

// Partition is the controller's state of one partition.
type Partition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// TopicID is the topic's identity (Kafka's KIP-516 topic ID), the same
	// in every partition of a topic: a topic deleted and created again
	// under the same name has another one. Empty for topics stored before
	// topic IDs (the controller gives them one when it activates).
	TopicID string `json:"topic_id,omitempty"`
	// Leader is a broker id, or -1 (NoLeader) when no replica may lead.
	Leader      int32 `json:"leader"`
	LeaderEpoch int32 `json:"leader_epoch"`
	// PartitionEpoch (Kafka's zkVersion) rises by exactly one at every
	// write through UpdatePartitions.
	PartitionEpoch int32   `json:"partition_epoch"`
	ISR            []int32 `json:"isr"`
	Replicas       []int32 `json:"replicas"`
	// AddingReplicas and RemovingReplicas are set while a reassignment runs
	// (Kafka's KIP-455): Replicas is then the union of the old and the target
	// assignment, AddingReplicas the target replicas not in the old one, and
	// RemovingReplicas the old ones not in the target. Both empty otherwise.
	AddingReplicas   []int32 `json:"adding_replicas,omitempty"`
	RemovingReplicas []int32 `json:"removing_replicas,omitempty"`
	// ELR are the eligible leader replicas (Kafka's KIP-966): replicas out
	// of the ISR that still hold every committed record, because they left
	// it while it was below min.insync.replicas, when the HW cannot move.
	// Sorted. A clean election takes an ISR member first, then an ELR one.
	ELR []int32 `json:"elr,omitempty"`
	// LastKnownELR are the ELR members that came back from an unclean
	// shutdown (they may have lost their unflushed tail) while nobody else
	// was left in the ISR or the ELR: the last resort of an election.
	// Sorted.
	LastKnownELR []int32 `json:"last_known_elr,omitempty"`
}

// NoLeader is Partition.Leader of a leaderless partition.
const NoLeader int32 = -1

// Clone returns a copy of p that shares no slice with it.
func (p Partition) Clone() Partition {
	p.ISR = slices.Clone(p.ISR)
	p.Replicas = slices.Clone(p.Replicas)
	p.AddingReplicas = slices.Clone(p.AddingReplicas)
	p.RemovingReplicas = slices.Clone(p.RemovingReplicas)
	p.ELR = slices.Clone(p.ELR)
	p.LastKnownELR = slices.Clone(p.LastKnownELR)
	return p
}

// DeletedTopic is a deleted topic some replicas of which have not deleted
// their logs yet (a broker that was down or failing when it was deleted):
// its deletion is pending until each has.
type DeletedTopic struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	// Pending are the replicas still to delete, by partition, sorted.
	Pending []PendingReplicas `json:"pending"`
}

// PendingReplicas are the brokers that still hold a log of one partition of
// a deleted topic.
type PendingReplicas struct {
	Partition int32   `json:"partition"`
	Brokers   []int32 `json:"brokers"`
}

// Replica names one broker's replica of one partition.
type Replica struct {
	Partition int32
	Broker    int32
}

// TopicConfig is a topic's config overrides (topicconfig's keys, as strings)
// and their version. The store does not interpret them: the controller
// validates before storing. Version rises by one at every change, so that a
// broker can tell a newer set from one delivered late.
type TopicConfig struct {
	Version int64             `json:"version"`
	Configs map[string]string `json:"configs,omitempty"`
	// MinIsrFloor (0: none) is, while a raise of the topic's
	// min.insync.replicas travels to the brokers, the value before it:
	// leaders that have not heard yet still commit under it, so the
	// controller must not assume more when it keeps replicas as eligible
	// leaders. It is stored with the raise, in the same write, so that a
	// controller taking over keeps honouring it, and cleared by a later
	// write once every broker has the new version.
	MinIsrFloor int `json:"min_isr_floor,omitempty"`
}

// Clone returns a copy of c that shares no map with it.
func (c TopicConfig) Clone() TopicConfig {
	c.Configs = maps.Clone(c.Configs)
	return c
}

// Topic is a topic with all its partitions, sorted by partition.
type Topic struct {
	Name       string      `json:"name"`
	Partitions []Partition `json:"partitions"`
}

// PartitionUpdate is one compare-and-set in UpdatePartitions: write New if
// the stored partition epoch of (New.Topic, New.Partition) is Expected.
// Invariant: New.PartitionEpoch == Expected+1.
type PartitionUpdate struct {
	Expected int32
	New      Partition
}

// Store holds the cluster metadata. Implementations are safe for concurrent
// use. See the package documentation for the rules they share.
type Store interface {
	// BumpControllerEpoch raises the controller epoch to one more than the
	// larger of the stored epoch and past, persists it and returns it. The
	// first call with past 0 returns 1. past is an epoch seen elsewhere (a
	// broker answered STALE_CONTROLLER_EPOCH naming it): the controller
	// moves past it in one step, through the store, so standbys agree.
	BumpControllerEpoch(ctx context.Context, past int32) (int32, error)
	// ControllerEpoch returns the current controller epoch, 0 before the
	// first BumpControllerEpoch.
	ControllerEpoch(ctx context.Context) (int32, error)

	// RegisterBroker stores b (replacing an earlier registration of b.ID)
	// with a new broker epoch and Fenced false, and returns what it stored.
	// b.Epoch and b.Fenced are ignored.
	RegisterBroker(ctx context.Context, b Broker) (Broker, error)
	// Brokers returns every registered broker, fenced ones included, by id.
	Brokers(ctx context.Context) ([]Broker, error)
	// UpdateBroker replaces the host, port and fenced flag of broker b.ID.
	// b.Epoch must be the stored epoch (ErrConflict otherwise: the broker
	// registered again since it was read); ErrNotFound if b.ID never
	// registered.
	UpdateBroker(ctx context.Context, b Broker) error

	// CreateTopic stores a new topic with its config overrides (nil: none)
	// at config version 1. parts must be numbered 0..len-1 (in any order),
	// each with Topic equal to name or empty (then set to name). ErrExists
	// if the topic exists.
	CreateTopic(ctx context.Context, name string, parts []Partition, configs map[string]string) error
	// CreatePartitions adds parts to a topic that has exactly existing
	// partitions (Kafka's CreatePartitions), in one transaction: all of
	// them or none. parts must be numbered existing..existing+len-1 (in
	// any order), each with Topic equal to name or empty, and the stored
	// topic's ID. ErrNotFound if there is no such topic; ErrConflict if it
	// has another number of partitions (a retry whose first attempt
	// landed finds them all there); ErrInvalid for bad parts. Nothing is
	// written on error.
	CreatePartitions(ctx context.Context, name string, existing int32, parts []Partition) error
	// TopicConfigs returns every topic's config overrides, by topic name. A
	// topic stored before topic configs has none there (version 0).
	TopicConfigs(ctx context.Context) (map[string]TopicConfig, error)
	// SetTopicConfig replaces a topic's config overrides if their stored
	// version is expected, and returns what it stored, at version
	// expected+1. ErrNotFound if there is no such topic; ErrConflict if the
	// version differs (nothing written).
	// The stored MinIsrFloor is kept.
	SetTopicConfig(ctx context.Context, name string, expected int64, configs map[string]string) (TopicConfig, error)
	// AlterTopicConfig stores next as a topic's config (overrides, version
	// and min ISR floor) if the stored version is expected, and applies
	// updates, compare-and-sets of partitions of that topic, in the same
	// transaction: all or nothing. A change of min.insync.replicas and the
	// partition states it makes stale (their ELR) are one write, so no
	// reader sees one without the other. next.Version is expected+1 (a
	// change) or expected (a write of the floor alone: next.Configs must
	// then be the stored overrides). ErrInvalid for another version, stored
	// overrides changed at the same version, an update of another topic or
	// one UpdatePartitions refuses; ErrNotFound if there is no such topic
	// or partition; ErrConflict if the version or a partition epoch
	// differs. Nothing is written on error.
	AlterTopicConfig(ctx context.Context, name string, expected int64, next TopicConfig, updates []PartitionUpdate) error
	// DeleteTopic removes a topic, its partitions and its configs, and records in
	// the same transaction every replica of them as pending deletion
	// (DeletedTopics) under the topic's ID; ErrNotFound if there is none.
	DeleteTopic(ctx context.Context, name string) error
	// DeletedTopics returns the deleted topics with deletions pending,
	// sorted by name then ID.
	DeletedTopics(ctx context.Context) ([]DeletedTopic, error)
	// CompleteDeletions marks replicas of the deleted topic with topicID as
	// deleted; a topic with none left pending is forgotten. Replicas (or a
	// topic) not pending are ignored.
	CompleteDeletions(ctx context.Context, topicID string, done []Replica) error
	// Topic returns one topic; ErrNotFound if there is none.
	Topic(ctx context.Context, name string) (Topic, error)
	// Partitions returns every partition of every topic, sorted by topic
	// then partition.
	Partitions(ctx context.Context) ([]Partition, error)
	// Partition returns one partition; ErrNotFound if there is none.
	Partition(ctx context.Context, topic string, partition int32) (Partition, error)
	// UpdatePartitions applies every update or none, in one transaction.
	// ErrInvalid if an update's new epoch is not Expected+1 or a partition
	// appears twice; ErrNotFound if a partition does not exist; ErrConflict
	// if a stored partition epoch is not the Expected one. An empty list is
	// a no-op.
	UpdatePartitions(ctx context.Context, updates []PartitionUpdate) error

	// Acls returns every stored ACL, sorted (CompareACLs).
	Acls(ctx context.Context) ([]ACL, error)
	// CreateAcls stores acls in one transaction and returns those that were
	// not stored already, sorted (an ACL stored twice is one ACL). ErrInvalid
	// if one has an empty field; nothing is written then.
	CreateAcls(ctx context.Context, acls []ACL) ([]ACL, error)
	// DeleteAcls removes, in one transaction, every stored ACL that matches
	// any of filters, and returns them sorted. No filter deletes nothing.
	DeleteAcls(ctx context.Context, filters []ACLFilter) ([]ACL, error)

	// ReplicationThrottle returns the stored replication throttle in
	// bytes/s (0: none, also when never set).
	ReplicationThrottle(ctx context.Context) (int64, error)
	// SetReplicationThrottle stores the replication throttle; 0 removes
	// it. ErrInvalid if it is negative.
	SetReplicationThrottle(ctx context.Context, bytesPerSec int64) error

	// AllocateProducerIDs hands out the next block of count producer IDs
	// (Kafka's KIP-730) and returns its first ID: the block is
	// [first, first+count). The first block starts at 1 (0 means "no
	// producer" on the wire). The end of the block is stored before it
	// returns, and every block starts after the end of the one before, so
	// no ID is handed out twice, across restarts and controllers. A block
	// whose write failed, even one that landed (an unknown outcome), is
	// never handed out by a later call: it is skipped, not reused.
	// ErrInvalid if count is not positive.
	AllocateProducerIDs(ctx context.Context, count int32) (int64, error)
	// LastProducerID is the last ID of the last block AllocateProducerIDs
	// handed out, 0 before the first.
	LastProducerID(ctx context.Context) (int64, error)
	// BumpProducerEpoch hands out the epoch after from for producer ID id,
	// if from is the newest epoch handed out for it (0 for an ID never
	// bumped: an ID is issued at epoch 0), and stores it: two bumps from
	// the same epoch never both succeed. ErrNotFound if id was never
	// handed out (below 1 or past LastProducerID); ErrConflict if from is
	// not the newest epoch (the stored one is named); ErrInvalid if from is
	// negative or math.MaxInt16 (the epochs of the ID are exhausted: the
	// producer needs a new ID). Nothing is written on error.
	BumpProducerEpoch(ctx context.Context, id int64, from int16) (int16, error)

	// Close releases the store. Later calls fail with ErrClosed. Close is
	// idempotent.
	Close() error
}

// ACL is one stored ACL. The store keeps ACLs as plain strings and does not
// interpret them: the controller validates operations and pattern types
// (internal/authz) before storing, and the store only checks that nothing
// is empty, so that a newer operation needs no store change.
type ACL struct {
	Principal    string `json:"principal"`
	Operation    string `json:"operation"`
	ResourceType string `json:"resource_type"`
	PatternType  string `json:"pattern_type"`
	Name         string `json:"name"`
}

// ACLFilter matches ACLs; an empty field matches any value.
type ACLFilter struct {
	Principal    string
	Operation    string
	ResourceType string
	PatternType  string
	Name         string
}

// Matches reports whether a matches f.
func (f ACLFilter) Matches(a ACL) bool {
	eq := func(want, got string) bool { return want == "" || want == got }
	return eq(f.Principal, a.Principal) && eq(f.Operation, a.Operation) && eq(f.ResourceType, a.ResourceType) &&
		eq(f.PatternType, a.PatternType) && eq(f.Name, a.Name)
}

// key is the ACL's identity and sort key: its fields, NUL-separated (no
// field holds a NUL: principals are URIs, names topic names).
func (a ACL) key() string {
	return a.ResourceType + "\x00" + a.PatternType + "\x00" + a.Name + "\x00" + a.Principal + "\x00" + a.Operation
}

// CompareACLs orders ACLs by resource type, pattern type, name, principal,
// then operation: an ACL list reads by resource.
func CompareACLs(a, b ACL) int { return cmp.Compare(a.key(), b.key()) }

// checkACLs validates CreateAcls' argument.
func checkACLs(acls []ACL) error {
	for _, a := range acls {
		if a.Principal == "" || a.Operation == "" || a.ResourceType == "" || a.PatternType == "" || a.Name == "" {
			return fmt.Errorf("create acls: %+v has an empty field: %w", a, ErrInvalid)
		}
		if strings.ContainsRune(a.Principal+a.Operation+a.ResourceType+a.PatternType+a.Name, 0) {
			return fmt.Errorf("create acls: %+v holds a NUL: %w", a, ErrInvalid)
		}
	}
	return nil
}

// mergeACLs is stored plus add, sorted and without duplicates, and the
// ACLs of add that were not in stored.
func mergeACLs(stored, add []ACL) (all, created []ACL) {
	have := make(map[string]bool, len(stored)+len(add))
	all = slices.Clone(stored)
	for _, a := range stored {
		have[a.key()] = true
	}
	for _, a := range add {
		if !have[a.key()] {
			have[a.key()] = true
			all = append(all, a)
			created = append(created, a)
		}
	}
	slices.SortFunc(all, CompareACLs)
	slices.SortFunc(created, CompareACLs)
	return all, created
}

// removeACLs is stored without the ACLs any filter matches, and those.
func removeACLs(stored []ACL, filters []ACLFilter) (kept, deleted []ACL) {
	for _, a := range stored {
		if slices.ContainsFunc(filters, func(f ACLFilter) bool { return f.Matches(a) }) {
			deleted = append(deleted, a)
		} else {
			kept = append(kept, a)
		}
	}
	slices.SortFunc(kept, CompareACLs)
	slices.SortFunc(deleted, CompareACLs)
	return kept, deleted
}

// nextControllerEpoch is the epoch BumpControllerEpoch stores after stored,
// moving past past.
func nextControllerEpoch(stored int64, past int32) (int32, error) {
	base := max(stored, int64(past))
	if base >= math.MaxInt32 {
		return 0, fmt.Errorf("bump controller epoch: epoch %d is the largest", base)
	}
	return int32(base) + 1, nil
}

// checkBroker validates a RegisterBroker or UpdateBroker argument.
func checkBroker(b Broker) error {
	if b.ID < 0 {
		return fmt.Errorf("broker id %d is negative: %w", b.ID, ErrInvalid)
	}
	return nil
}

// newTopic validates CreateTopic's arguments and returns the topic to store,
// its partitions cloned, named and sorted.
func newTopic(name string, parts []Partition) (Topic, error) {
	if name == "" {
		return Topic{}, fmt.Errorf("create topic: empty name: %w", ErrInvalid)
	}
	if len(parts) == 0 {
		return Topic{}, fmt.Errorf("create topic %s: no partitions: %w", name, ErrInvalid)
	}
	t := Topic{Name: name, Partitions: make([]Partition, len(parts))}
	for i, p := range parts {
		if p.Topic == "" {
			p.Topic = name
		}
		if p.Topic != name {
			return Topic{}, fmt.Errorf("create topic %s: partition %d names topic %q: %w", name, p.Partition, p.Topic, ErrInvalid)
		}
		t.Partitions[i] = p.Clone()
	}
	for _, p := range t.Partitions {
		if p.TopicID != t.Partitions[0].TopicID {
			return Topic{}, fmt.Errorf("create topic %s: partitions with topic IDs %q and %q: %w", name, t.Partitions[0].TopicID, p.TopicID, ErrInvalid)
		}
	}
	slices.SortFunc(t.Partitions, func(a, b Partition) int { return cmp.Compare(a.Partition, b.Partition) })
	for i, p := range t.Partitions {
		if p.Partition != int32(i) {
			return Topic{}, fmt.Errorf("create topic %s: partitions must be numbered 0..%d, found %d: %w", name, len(parts)-1, p.Partition, ErrInvalid)
		}
	}
	return t, nil
}

// newPartitions validates CreatePartitions' arguments and returns the
// partitions to store, cloned, named and sorted.
func newPartitions(name string, existing int32, parts []Partition) ([]Partition, error) {
	if name == "" {
		return nil, fmt.Errorf("create partitions: empty topic name: %w", ErrInvalid)
	}
	if existing < 1 || len(parts) == 0 {
		return nil, fmt.Errorf("create partitions of %s: %d existing, %d new: %w", name, existing, len(parts), ErrInvalid)
	}
	out := make([]Partition, len(parts))
	for i, p := range parts {
		if p.Topic == "" {
			p.Topic = name
		}
		if p.Topic != name {
			return nil, fmt.Errorf("create partitions of %s: partition %d names topic %q: %w", name, p.Partition, p.Topic, ErrInvalid)
		}
		out[i] = p.Clone()
	}
	slices.SortFunc(out, func(a, b Partition) int { return cmp.Compare(a.Partition, b.Partition) })
	for i, p := range out {
		if p.Partition != existing+int32(i) {
			return nil, fmt.Errorf("create partitions of %s: new partitions must be numbered %d..%d, found %d: %w",
				name, existing, existing+int32(len(parts))-1, p.Partition, ErrInvalid)
		}
		if p.TopicID != out[0].TopicID {
			return nil, fmt.Errorf("create partitions of %s: partitions with topic IDs %q and %q: %w", name, out[0].TopicID, p.TopicID, ErrInvalid)
		}
	}
	return out, nil
}

// checkNewPartitions checks new partitions against the stored topic: it
// must have existing partitions (ErrConflict otherwise) and the new ones its
// topic ID (ErrInvalid otherwise).
func checkNewPartitions(name string, stored []Partition, existing int32, parts []Partition) error {
	if int32(len(stored)) != existing {
		return fmt.Errorf("create partitions of %s: it has %d partitions, expected %d: %w", name, len(stored), existing, ErrConflict)
	}
	if id := stored[0].TopicID; parts[0].TopicID != id {
		return fmt.Errorf("create partitions of %s: topic ID %q, stored %q: %w", name, parts[0].TopicID, id, ErrInvalid)
	}
	return nil
}

// NewDeletedTopic is the DeletedTopic of t: every replica of every
// partition, sorted, under the topic's ID ("name:<topic>" for a topic
// stored without one). ok is false when t has no replicas at all.
func NewDeletedTopic(t Topic) (DeletedTopic, bool) {
	d := DeletedTopic{Name: t.Name}
	for _, p := range t.Partitions {
		if d.ID == "" {
			d.ID = p.TopicID
		}
		if len(p.Replicas) == 0 {
			continue
		}
		brokers := slices.Clone(p.Replicas)
		slices.Sort(brokers)
		d.Pending = append(d.Pending, PendingReplicas{Partition: p.Partition, Brokers: slices.Compact(brokers)})
	}
	if d.ID == "" {
		d.ID = "name:" + t.Name // a topic stored before topic IDs
	}
	return d, len(d.Pending) > 0
}

// cloneDeleted copies d so that it shares no slice.
func cloneDeleted(d DeletedTopic) DeletedTopic {
	out := DeletedTopic{Name: d.Name, ID: d.ID, Pending: make([]PendingReplicas, len(d.Pending))}
	for i, pr := range d.Pending {
		out.Pending[i] = PendingReplicas{Partition: pr.Partition, Brokers: slices.Clone(pr.Brokers)}
	}
	return out
}

// sortDeleted sorts deleted topics by name, then ID.
func sortDeleted(ds []DeletedTopic) {
	slices.SortFunc(ds, func(a, b DeletedTopic) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
}

// completeDeletions is d without done; ok is false when nothing is left.
func completeDeletions(d DeletedTopic, done []Replica) (DeletedTopic, bool) {
	next := DeletedTopic{Name: d.Name, ID: d.ID}
	for _, pr := range d.Pending {
		brokers := slices.DeleteFunc(slices.Clone(pr.Brokers), func(b int32) bool {
			return slices.Contains(done, Replica{Partition: pr.Partition, Broker: b})
		})
		if len(brokers) > 0 {
			next.Pending = append(next.Pending, PendingReplicas{Partition: pr.Partition, Brokers: brokers})
		}
	}
	return next, len(next.Pending) > 0
}

// partitionKey identifies a partition.
type partitionKey struct {
	topic     string
	partition int32
}

// checkUpdates validates UpdatePartitions' argument without looking at the
// stored state.
func checkUpdates(updates []PartitionUpdate) error {
	seen := make(map[partitionKey]bool, len(updates))
	for _, u := range updates {
		k := partitionKey{u.New.Topic, u.New.Partition}
		if seen[k] {
			return fmt.Errorf("update %s-%d: partition appears twice: %w", k.topic, k.partition, ErrInvalid)
		}
		seen[k] = true
		if u.Expected < 0 || u.Expected == math.MaxInt32 || u.New.PartitionEpoch != u.Expected+1 {
			return fmt.Errorf("update %s-%d: new partition epoch %d is not expected %d + 1: %w",
				k.topic, k.partition, u.New.PartitionEpoch, u.Expected, ErrInvalid)
		}
	}
	return nil
}

// checkAlterTopicConfig validates AlterTopicConfig's argument without
// looking at the stored state.
func checkAlterTopicConfig(name string, expected int64, next TopicConfig, updates []PartitionUpdate) error {
	if next.Version != expected && next.Version != expected+1 {
		return fmt.Errorf("alter topic config %s: version %d is neither expected %d nor the next: %w", name, next.Version, expected, ErrInvalid)
	}
	if next.MinIsrFloor < 0 {
		return fmt.Errorf("alter topic config %s: min ISR floor %d is negative: %w", name, next.MinIsrFloor, ErrInvalid)
	}
	for _, u := range updates {
		if u.New.Topic != name {
			return fmt.Errorf("alter topic config %s: update of partition %s-%d: %w", name, u.New.Topic, u.New.Partition, ErrInvalid)
		}
	}
	return checkUpdates(updates)
}

// checkConfigVersion checks a stored topic config against AlterTopicConfig's
// expected version and next config.
func checkConfigVersion(name string, cur TopicConfig, expected int64, next TopicConfig) error {
	if cur.Version != expected {
		return fmt.Errorf("alter topic config %s: version %d, expected %d: %w", name, cur.Version, expected, ErrConflict)
	}
	if next.Version == expected && !maps.Equal(cur.Configs, next.Configs) {
		return fmt.Errorf("alter topic config %s: overrides changed at the same version %d: %w", name, expected, ErrInvalid)
	}
	return nil
}

// conflict is the error of a lost compare-and-set on a partition epoch.
func conflict(p Partition, expected, stored int32) error {
	return fmt.Errorf("update %s-%d: expected partition epoch %d, stored %d: %w",
		p.Topic, p.Partition, expected, stored, ErrConflict)
}

func partitionNotFound(topic string, partition int32) error {
	return fmt.Errorf("partition %s-%d: %w", topic, partition, ErrNotFound)
}

func comparePartitions(a, b Partition) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}
