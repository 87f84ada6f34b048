package client

import (
	"fmt"
	"io"
	"slices"
	"strings"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// ErrorCodeInfo explains one ErrorCode to an operator or a client author:
// what it means, whether the same request may succeed if sent again
// unchanged (Kafka's RetriableException), and what to do. It is the source
// of docs/reference/errors.md (ctlclient help --markdown-errors); a test
// fails when the proto enum has a code without one.
type ErrorCodeInfo struct {
	Meaning   string
	Retriable bool
	Action    string
}

// ErrorCodeInfos is the explanation of every ErrorCode, keyed by code.
var ErrorCodeInfos = map[replicadv1.ErrorCode]ErrorCodeInfo{
	replicadv1.ErrorCode_ERROR_CODE_NONE: {
		"No error.", false, "Nothing."},
	replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR: {
		"The server failed in a way no other code names (an internal error); the request may have been applied in part.", false,
		"Read the server's log at that time (it logs the cause at error). An idempotent producer sends the batch again: the leader answers a duplicate with the original offsets."},
	replicadv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE: {
		"The offset asked for is below the log start offset (deleted by retention or delete-records) or above the log end offset.", false,
		"Consume from an offset inside the range: `ctlclient describe` shows the log start and end offsets; `ctlclient consume --offset earliest` (or `latest`) starts at either end."},
	replicadv1.ErrorCode_ERROR_CODE_CORRUPT_MESSAGE: {
		"A record batch failed its CRC or could not be decoded.", true,
		"Send the batch again; if it keeps failing, the client encodes it wrongly. On a follower it is logged and the fetch retried."},
	replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION: {
		"This broker hosts no replica of the partition: the topic does not exist, was deleted, or was created a moment ago and the broker has not heard yet.", true,
		"Check the name (`ctlclient list-topics`); a topic just created is there within moments, and the client looks the leader up again."},
	replicadv1.ErrorCode_ERROR_CODE_LEADER_NOT_AVAILABLE: {
		"The partition has no leader right now (leaderless, or an election is under way).", true,
		"Retry after a short backoff; if it lasts, `ctlclient describe-topic` shows whether every ISR member is down (then bring one back, or see --unclean-leader-election)."},
	replicadv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER: {
		"This broker is not the partition's leader (for produce and consume) or not a replica at all (for fetches).", true,
		"Look the leader up again (Metadata, or `--controller`/`--bootstrap` in ctlclient, which do it) and send it there."},
	replicadv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT: {
		"An acks=all produce was appended on the leader but the ISR did not confirm it within timeout_ms.", true,
		"The records may be stored: an idempotent producer sends the batch again and gets the original offsets; a plain producer may then duplicate. Look for slow or lagging followers (`ctlclient cluster health`)."},
	replicadv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE: {
		"The broker named is not alive (fenced, shut down, or never registered).", false,
		"Start the broker, or name another: `ctlclient describe-cluster` lists the live ones."},
	replicadv1.ErrorCode_ERROR_CODE_REPLICA_NOT_AVAILABLE: {
		"A replica the request needs is not available on this broker (offline log dir, or not created yet).", true,
		"Retry; if it lasts, `ctlclient describe` on that broker shows the replica's state and log dir."},
	replicadv1.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE: {
		"The encoded batch is larger than the broker's --max-batch-bytes.", false,
		"Send smaller batches, or raise --max-batch-bytes (at most --segment-bytes) on every broker."},
	replicadv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH: {
		"The request comes from a controller older than one this broker has already heard from (a deposed controller).", false,
		"Nothing for a client: the active controller sends its own. By hand (`ctlclient leader-and-isr`), give the current --controller-epoch."},
	replicadv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS: {
		"An acks=all produce was refused before appending: the ISR is smaller than min.insync.replicas. Nothing was appended.", true,
		"Bring the missing replicas back (`ctlclient describe-topic` shows the ISR); retrying succeeds once the ISR is large enough. Or lower min.insync.replicas, accepting less durability."},
	replicadv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND: {
		"An acks=all produce was appended, then the ISR shrank below min.insync.replicas before it was confirmed.", true,
		"The records may be stored: an idempotent producer sends the batch again and gets the original offsets. Bring the missing replicas back."},
	replicadv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED: {
		"The caller's certificate may not use (or describe) the topic.", false,
		"Ask an admin for an ACL (`ctlclient acl add`), or use a certificate whose role allows it (docs: security)."},
	replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS: {
		"A topic of that name exists. After a create that timed out, it may be your own create that was applied.", false,
		"`ctlclient describe-topic --topic T` shows it; use it, or delete it first."},
	replicadv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS: {
		"The partition count is not allowed (below 1, or not above the topic's current count when adding partitions).", false,
		"Give a valid count; partitions can be added, never removed."},
	replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR: {
		"The replication factor is below 1 or above the number of live brokers.", false,
		"Give a factor no larger than `ctlclient describe-cluster`'s live brokers, or start more brokers."},
	replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT: {
		"A replica list names an unknown broker, a broker twice, or has the wrong length.", false,
		"Fix the list: distinct ids of registered brokers (`ctlclient describe-cluster`)."},
	replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER: {
		"This controller is not the active one (a standby, or deposed); the answer may name the active one.", true,
		"Ask the active controller: give every controller to `--controller a,b,c` and ctlclient and the brokers find it themselves."},
	replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST: {
		"The request is malformed in a way the message names (a field out of range, a contradiction).", false,
		"Fix the request as the message says; sending it again unchanged fails the same way."},
	replicadv1.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER: {
		"An idempotent batch's sequence is not the one after the producer's last on this partition (an earlier batch was lost or is out of order). Nothing was appended.", false,
		"The Go client resends the batches in order, and after repeated failures starts over under a new epoch; a hand-made producer must do the same."},
	replicadv1.ErrorCode_ERROR_CODE_DUPLICATE_SEQUENCE_NUMBER: {
		"Kafka's code for a retried batch already appended. A replicad leader never sends it: it answers success with the original offsets and `duplicate` set.", false,
		"Nothing: seen only in logs."},
	replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH: {
		"The batch's producer epoch is older than the newest this partition has seen for the producer ID: a newer instance of the producer fenced this one. Nothing was appended.", false,
		"Stop this producer instance; the newer one owns the producer ID."},
	replicadv1.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS: {
		"A reassignment of this partition is already running.", false,
		"Wait for it (`ctlclient reassign --verify --plan FILE`, or `describe-topic`), or cancel it first (`ctlclient reassign --cancel`)."},
	replicadv1.ErrorCode_ERROR_CODE_OPERATION_NOT_ATTEMPTED: {
		"The controller did not apply the request, and no other controller can have: nothing changed.", true,
		"Send it again; a leader whose ISR change got it goes back to the committed ISR and retries by itself."},
	replicadv1.ErrorCode_ERROR_CODE_STORAGE_ERROR: {
		"The replica's log dir failed (an I/O error); the dir is taken offline and its leaderships move to other brokers.", true,
		"Clients retry on the new leader. Operators: the broker's log names the dir and the error; fix or replace the disk, then restart the broker (docs: operations)."},
	replicadv1.ErrorCode_ERROR_CODE_LOG_DIR_NOT_FOUND: {
		"The log dir named (alter-log-dir) is not one of the broker's --log-dirs, or is offline.", false,
		"Name one of the broker's online dirs: `ctlclient describe` lists them."},
	replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID: {
		"The partition holds no state for the producer ID (expired after --producer-id-expiration, or truncated away) and the batch does not start a sequence. Nothing was appended.", false,
		"Re-initialize the producer (InitProducerId with its ID bumps the epoch) and start the partition's sequence at 0; the Go client does this itself."},
	replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH: {
		"The request's leader epoch is older than the partition's: the sender's view of the leadership is stale.", true,
		"Refresh the metadata (leader and epoch) and send it again; clients do this themselves."},
	replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_LEADER_EPOCH: {
		"The request's leader epoch is newer than this broker knows: it has not heard of the new leadership yet.", true,
		"Retry after a short backoff; the broker hears from the controller within moments."},
	replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH: {
		"The request was meant for an earlier registration of this broker (it restarted and registered again), or a fetch carried an old broker epoch.", false,
		"Nothing for a client: the controller and the brokers send requests for the current registration."},
	replicadv1.ErrorCode_ERROR_CODE_PREFERRED_LEADER_NOT_AVAILABLE: {
		"The preferred replica (first in the list) cannot lead now: it is not alive or not in the ISR.", true,
		"Bring it back and let it catch up into the ISR, then elect again (`ctlclient elect --preferred`)."},
	replicadv1.ErrorCode_ERROR_CODE_ELIGIBLE_LEADERS_NOT_AVAILABLE: {
		"No replica may lead: none alive is in the ISR.", true,
		"Bring an ISR member back; only if none can return, an unclean election (loses records) is the way out."},
	replicadv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED: {
		"The requested leader already leads.", false,
		"Nothing."},
	replicadv1.ErrorCode_ERROR_CODE_NO_REASSIGNMENT_IN_PROGRESS: {
		"A reassignment cancel found no reassignment of the partition running (it may have just finished).", false,
		"Nothing; `ctlclient describe-topic` shows the current replicas."},
	replicadv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION: {
		"An ISR change (AlterPartition) was made from an older partition epoch than the controller's.", false,
		"Nothing for a client: the leader takes the controller's state and proposes again."},
	replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID: {
		"The topic ID is not the one this broker holds for the partition.", true,
		"Refresh the metadata: the topic may have been deleted and created again."},
	replicadv1.ErrorCode_ERROR_CODE_DUPLICATE_BROKER_REGISTRATION: {
		"A broker registered with an id whose session is alive under another incarnation (another process with that id, or this one restarted before its old session lapsed).", true,
		"A restarted broker retries until the old session expires (--session-timeout). If two processes share an id, give one another --id."},
	replicadv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID: {
		"The request's topic ID and the partition's differ: a topic of the same name was deleted and created again.", true,
		"Refresh the metadata and use the new topic ID."},
	replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA: {
		"A proposed ISR names a replica that may not join it (fenced, shutting down, or not alive).", false,
		"Nothing for a client: the leader proposes again without it."},
	replicadv1.ErrorCode_ERROR_CODE_WILL_EXCEED_PARTITION_LIMITS: {
		"The create or reassignment would put more partitions on a broker than its --max-partitions allows (KIP-578; replicad's own number, 1000).", false,
		"The message names the brokers, their counts and budgets: spread the partitions over more brokers, delete topics, or raise --max-partitions."},
}

// WriteErrorCodesMarkdown writes docs/reference/errors.md: every ErrorCode
// of the proto enum, in number order, with its explanation.
func WriteErrorCodesMarkdown(w io.Writer) {
	fmt.Fprint(w, `# Error codes

<!-- Generated by `+"`make gen`"+` (ctlclient help --markdown-errors) from proto/replicad/v1/common.proto
and client/errorcodes.go; edit those, not this file. -->

Answers carry an `+"`error_code`"+` with gRPC status OK: the call reached the server, which
refused or could only partly do what was asked. The numbers are Kafka's (except
WILL_EXCEED_PARTITION_LIMITS, which Kafka named but never numbered). In the proto enum
each name is prefixed `+"`ERROR_CODE_`"+`; ctlclient exits 1 on any code but NONE.

**Retriable** means the same request, sent again unchanged, can succeed once the cluster
moves on (a new leader, an ISR back to size): Kafka's RetriableException. The Go client
(package client) and ctlclient's routed calls (`+"`--controller`, `--bootstrap`"+`) look the
leader up again and retry the leadership ones themselves.

A malformed request (a bad topic name, a negative partition, ...) gets gRPC
InvalidArgument naming the field instead of an error code.

| Code | Name | Retriable | Meaning | What to do |
|-----:|------|-----------|---------|------------|
`)
	codes := make([]int32, 0, len(replicadv1.ErrorCode_name))
	for c := range replicadv1.ErrorCode_name {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		name := strings.TrimPrefix(replicadv1.ErrorCode_name[c], "ERROR_CODE_")
		info, ok := ErrorCodeInfos[replicadv1.ErrorCode(c)]
		if !ok {
			info.Meaning = "(not explained yet)"
		}
		retriable := "no"
		if info.Retriable {
			retriable = "yes"
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s |\n", c, name, retriable, mdCell(info.Meaning), mdCell(info.Action))
	}
}

// mdCell is s made safe inside a Markdown table cell.
func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
