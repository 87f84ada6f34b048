package client

import (
	"bytes"
	"strings"
	"testing"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Every code of the proto enum is explained (docs/reference/errors.md is
// made from the table), and the table explains no code the enum lacks: a
// code added to the proto fails here until it gets its row.
func TestEveryErrorCodeIsExplained(t *testing.T) {
	for c, name := range replicadv1.ErrorCode_name {
		info, ok := ErrorCodeInfos[replicadv1.ErrorCode(c)]
		if !ok {
			t.Errorf("%s (%d) has no entry in ErrorCodeInfos (client/errorcodes.go)", name, c)
			continue
		}
		if strings.TrimSpace(info.Meaning) == "" || strings.TrimSpace(info.Action) == "" {
			t.Errorf("%s: the meaning and what to do must both be written", name)
		}
	}
	for c := range ErrorCodeInfos {
		if _, ok := replicadv1.ErrorCode_name[int32(c)]; !ok {
			t.Errorf("ErrorCodeInfos explains %d, which the enum does not have", c)
		}
	}
	var b bytes.Buffer
	WriteErrorCodesMarkdown(&b)
	if strings.Contains(b.String(), "not explained yet") || !strings.Contains(b.String(), "| 6 | NOT_LEADER_OR_FOLLOWER | yes |") {
		t.Fatalf("page:\n%s", b.String())
	}
}
