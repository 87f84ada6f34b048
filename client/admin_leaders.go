package client

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Leaders is a LeaderSource that finds leaders in the controller's
// DescribeCluster (Config.Leaders), for a client given controllers rather
// than bootstrap brokers. A partition the controller does not list is an
// error no retry mends; one without a (known) leader is one a retry may.
func (a *Admin) Leaders() LeaderSource { return adminLeaders{a} }

type adminLeaders struct{ a *Admin }

func (s adminLeaders) Lookup(ctx context.Context, _ *Client, k TopicPartition) (LeaderView, error) {
	resp, err := s.a.DescribeCluster(ctx)
	if err != nil {
		return LeaderView{}, err
	}
	if code := resp.GetErrorCode(); code != replicadv1.ErrorCode_ERROR_CODE_NONE {
		return LeaderView{}, &LookupError{Msg: "describe-cluster: " + strings.TrimPrefix(code.String(), "ERROR_CODE_"), Retry: true}
	}
	addrs := map[int32]string{}
	v := LeaderView{Leaders: map[TopicPartition]Leader{}, Partitions: map[string]int32{}}
	for _, b := range resp.GetBrokers() {
		addrs[b.GetId()] = net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
		v.Brokers = append(v.Brokers, addrs[b.GetId()])
	}
	var found *replicadv1.ClusterPartition
	for _, p := range resp.GetPartitions() {
		pk := TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
		if pk == k {
			found = p
		}
		v.Partitions[pk.Topic] = max(v.Partitions[pk.Topic], pk.Partition+1)
		if addr, ok := addrs[p.GetLeader()]; ok && p.GetLeader() >= 0 {
			v.Leaders[pk] = Leader{Addr: addr, ID: p.GetLeader(), Epoch: -1}
		}
	}
	_, ok := v.Leaders[k]
	switch {
	case k.Topic == "":
		// A lookup for the brokers alone (InitProducerId).
	case found == nil:
		v.Err = &LookupError{Msg: fmt.Sprintf("%s: UNKNOWN_TOPIC_OR_PARTITION: the controller does not know it", k)}
	case found.GetLeader() < 0:
		v.Err = &LookupError{Msg: fmt.Sprintf("%s: LEADER_NOT_AVAILABLE: no leader", k), Retry: true}
	case !ok:
		v.Err = &LookupError{Msg: fmt.Sprintf("%s: LEADER_NOT_AVAILABLE: leader %d is not among the brokers", k, found.GetLeader()), Retry: true}
	}
	return v, nil
}
