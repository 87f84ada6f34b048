package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"google.golang.org/protobuf/encoding/protojson"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func leaderAndIsrCommand() *command {
	return &command{
		name:    "leader-and-isr",
		summary: "tell the broker to lead or follow partitions (what the controller sends)",
		usage: "--controller-id N --controller-epoch N --topic T --partition P --leader B --leader-epoch E\n" +
			"        --replicas 1,2,3 [--isr 1,2,3] [--partition-epoch N] [--new] [--topic-id ID] [--broker-epoch N] [--live-broker ID=HOST:PORT ...]\n" +
			"   or: ctlclient leader-and-isr --file req.json",
		details: `Sends one LeaderAndIsr request. The broker becomes leader of the partition
when --leader is its id, else follower. --isr defaults to --replicas.
--topic-id names the topic's identity: a replica of another topic ID here
(a topic of the name deleted and created again) is deleted first.
--file reads a whole LeaderAndIsrRequest in protojson (- for stdin), for many
partitions at once; grpcurl's field spellings are accepted.
Prints each partition's error code; exits 1 unless all are NONE (a stale
controller or leader epoch answers STALE_CONTROLLER_EPOCH).`,
		example: `ctlclient leader-and-isr --controller-id 0 --controller-epoch 1 --topic orders --partition 0 \
    --leader 1 --leader-epoch 1 --replicas 1 --new
ctlclient leader-and-isr --file - <<'EOF'
{"controllerId": 0, "controllerEpoch": 1, "partitionStates": [
  {"topic": "orders", "partition": 1, "controllerEpoch": 1, "leader": 1, "leaderEpoch": 1, "isr": [1], "replicas": [1]}]}
EOF`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			controllerID := int32Var(fs, "controller-id", 0, "id of the controller sending the request")
			controllerEpoch := int32Var(fs, "controller-epoch", 0, "epoch of that controller; older than the broker's is refused")
			brokerEpoch := fs.Int64("broker-epoch", 0, "the receiving broker's registration epoch (0 without a controller)")
			topic := fs.String("topic", "", "topic")
			partition := int32Var(fs, "partition", 0, "partition")
			leader := int32Var(fs, "leader", 0, "broker id of the leader")
			leaderEpoch := int32Var(fs, "leader-epoch", 0, "leader epoch; must grow for the change to take effect")
			partitionEpoch := int32Var(fs, "partition-epoch", 0, "version of leader and ISR (the seed's zkVersion)")
			var isr, replicas int32List
			fs.Var(&isr, "isr", "in-sync replicas, comma-separated (default: --replicas)")
			fs.Var(&replicas, "replicas", "assigned replicas, comma-separated")
			isNew := fs.Bool("new", false, "the partition was just created (its log may start empty)")
			topicID := fs.String("topic-id", "", "the topic's `ID` (22 characters of URL-safe base64); a replica of another one is deleted")
			var live brokerList
			fs.Var(&live, "live-broker", "endpoint of a leader, `ID=HOST:PORT` (repeatable)")
			file := fs.String("file", "", "read the whole request from this protojson `file` (- for stdin)")

			return func(ctx context.Context, e *env) error {
				var req *replicadv1.LeaderAndIsrRequest
				if *file != "" {
					if err := forbidFlags(fs, "--file", "controller-id", "controller-epoch", "broker-epoch", "topic", "partition", "leader",
						"leader-epoch", "partition-epoch", "isr", "replicas", "new", "topic-id", "live-broker"); err != nil {
						return err
					}
					var err error
					if req, err = readLeaderAndIsrFile(*file, e.stdin); err != nil {
						return err
					}
				} else {
					if err := requireFlags(fs, "controller-id", "controller-epoch", "topic", "partition", "leader", "leader-epoch", "replicas"); err != nil {
						return err
					}
					if !setFlags(fs)["isr"] {
						isr = replicas
					}
					req = &replicadv1.LeaderAndIsrRequest{
						ControllerId:    *controllerID,
						ControllerEpoch: *controllerEpoch,
						BrokerEpoch:     *brokerEpoch,
						PartitionStates: []*replicadv1.PartitionState{{
							Topic: *topic, Partition: *partition, ControllerEpoch: *controllerEpoch, Leader: *leader,
							LeaderEpoch: *leaderEpoch, Isr: isr, PartitionEpoch: *partitionEpoch, Replicas: replicas, IsNew: *isNew,
							TopicId: *topicID,
						}},
						LiveLeaders: live,
					}
				}
				var resp *replicadv1.LeaderAndIsrResponse
				err := e.callReplicaManager(ctx, func(rctx context.Context, c replicadv1.ReplicaManagerServiceClient) (err error) {
					resp, err = c.LeaderAndIsr(rctx, req)
					return err
				})
				if err != nil {
					return err
				}
				if err := e.printPartitionErrorsResponse(resp, resp.GetErrorCode(), resp.GetPartitionErrors()); err != nil {
					return err
				}
				return checkPartitionErrors("leader-and-isr", resp.GetErrorCode(), resp.GetErrorMessage(), resp.GetPartitionErrors())
			}
		},
	}
}

func readLeaderAndIsrFile(path string, stdin io.Reader) (*replicadv1.LeaderAndIsrRequest, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	req := &replicadv1.LeaderAndIsrRequest{}
	if err := protojson.Unmarshal(data, req); err != nil {
		return nil, usagef("--file %s: not a LeaderAndIsrRequest in protojson: %v", path, err)
	}
	return req, nil
}
