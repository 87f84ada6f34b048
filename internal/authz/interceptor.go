package authz

import (
	"context"
	"errors"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Enforcer is an Authorizer at a gRPC server: it identifies each call's
// principal, asks the Authorizer, and refuses with PermissionDenied (or
// Unauthenticated without a verified client certificate) before the
// handler runs, so a refused call changes nothing.
type Enforcer struct {
	Authorizer *Authorizer
	Rules      MappingRules
	// Logger logs every refusal at warn.
	Logger zerolog.Logger
	// Denied, if set, counts refusals (a metric), by full method.
	Denied func(fullMethod string)
}

// ServerOptions are the unary and stream interceptors.
func (e *Enforcer) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(e.unary), grpc.ChainStreamInterceptor(e.stream)}
}

// DescribeFilter is, for a call the interceptors let through, which topics
// its principal may describe (Authorizer.MayDescribe): the broker's
// Metadata answer leaves out the others. A call without a principal (it
// cannot have passed the interceptors) may describe none.
func (e *Enforcer) DescribeFilter(ctx context.Context) func(topic string) bool {
	p, err := e.Rules.PeerPrincipal(ctx)
	if err != nil {
		return func(string) bool { return false }
	}
	return func(topic string) bool { return e.Authorizer.MayDescribe(p, topic) }
}

// identify is the call's principal, or the refusal of a call without one.
func (e *Enforcer) identify(ctx context.Context, fullMethod string) (Principal, error) {
	p, err := e.Rules.PeerPrincipal(ctx)
	if err != nil {
		code := codes.PermissionDenied
		if errors.Is(err, ErrUnauthenticated) {
			code = codes.Unauthenticated
		}
		return Principal{}, e.refuse(ctx, code, "", fullMethod, err.Error())
	}
	return p, nil
}

// decide asks the Authorizer about p's call (req nil: a stream's start).
func (e *Enforcer) decide(ctx context.Context, p Principal, fullMethod string, req any) error {
	err := e.Authorizer.Authorize(p, fullMethod, req)
	if err == nil {
		return nil
	}
	var d *Denial
	if errors.As(err, &d) {
		return e.refuse(ctx, codes.PermissionDenied, p.URI, fullMethod, d.Reason)
	}
	return e.refuse(ctx, codes.PermissionDenied, p.URI, fullMethod, err.Error())
}

func (e *Enforcer) refuse(ctx context.Context, code codes.Code, principal, fullMethod, reason string) error {
	ev := e.Logger.Warn().Str("method", fullMethod).Str("reason", reason).Str("code", code.String())
	if principal != "" {
		ev = ev.Str("principal", principal)
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		ev = ev.Str("remote", p.Addr.String())
	}
	ev.Msg("refused a call: not authorized")
	if e.Denied != nil {
		e.Denied(fullMethod)
	}
	if principal == "" {
		return status.Errorf(code, "%s refused: %s", fullMethod[1:], reason)
	}
	return status.Error(code, (&Denial{Principal: principal, Method: fullMethod, Reason: reason}).Error())
}

func (e *Enforcer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if IsOpen(info.FullMethod) {
		return handler(ctx, req)
	}
	p, err := e.identify(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if err := e.decide(ctx, p, info.FullMethod, req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (e *Enforcer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if IsOpen(info.FullMethod) {
		return handler(srv, ss)
	}
	p, err := e.identify(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	if err := e.decide(ss.Context(), p, info.FullMethod, nil); err != nil {
		return err
	}
	return handler(srv, &checkedStream{ServerStream: ss, e: e, p: p, method: info.FullMethod})
}

// checkedStream authorizes every message received: the request decides
// (a fetch's replica id), not only the stream's opening. The principal is
// the connection's, identified once.
type checkedStream struct {
	grpc.ServerStream
	e      *Enforcer
	p      Principal
	method string
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	err := s.e.decide(s.Context(), s.p, s.method, m)
	if err != nil && s.method == replicadv1.LogService_ProduceStream_FullMethodName {
		// A producer's stream carries many topics' requests: one refused
		// is answered as unary Produce would be (its status in the
		// response), and the stream goes on.
		return &RefusedOnStream{err: err}
	}
	return err
}

// RefusedOnStream is the refusal of one message of a stream that goes on
// (ProduceStream): its handler answers it with the refusal's status.
type RefusedOnStream struct{ err error }

func (r *RefusedOnStream) Error() string { return r.err.Error() }
func (r *RefusedOnStream) Unwrap() error { return r.err }

// GRPCStatus is the refusal's status (PermissionDenied, Unauthenticated).
func (r *RefusedOnStream) GRPCStatus() *status.Status { return status.Convert(r.err) }

// StreamContinues says the stream is not over: the service layer, which
// does not import authz, tells such a refusal by this method.
func (r *RefusedOnStream) StreamContinues() bool { return true }
