package telemetry

import (
	"strings"

	"go.opentelemetry.io/otel/attribute"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// ErrorCodeKey is the attribute of an outcome on every span: Kafka's name of
// the error code, without the enum's ERROR_CODE_ prefix ("NONE",
// "STALE_CONTROLLER_EPOCH"), the names the brokers' spans and logs use, so
// one Jaeger tag search finds an outcome on the controller and the brokers.
const ErrorCodeKey = attribute.Key("replicad.error_code")

// ErrorCodeName is code's name as ErrorCodeKey carries it.
func ErrorCodeName(code replicadv1.ErrorCode) string {
	return strings.TrimPrefix(code.String(), "ERROR_CODE_")
}

// ErrorCode is the ErrorCodeKey attribute of code.
func ErrorCode(code replicadv1.ErrorCode) attribute.KeyValue {
	return ErrorCodeKey.String(ErrorCodeName(code))
}
