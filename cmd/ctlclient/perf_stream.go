package main

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// perfStreams are one perf worker's ProduceStreams, one per broker
// connection, opened on first use. The worker has one request in flight, so
// a stream is a plain send-then-receive.
type perfStreams struct {
	ctx context.Context
	// wait bounds one answer (the unary call's deadline): a stream has no
	// deadline per message, so a timer ends the stream instead.
	wait    time.Duration
	streams map[*grpc.ClientConn]*perfStream
}

type perfStream struct {
	s      replicadv1.LogService_ProduceStreamClient
	cancel context.CancelFunc
	timer  *time.Timer
}

func newPerfStreams(ctx context.Context, wait time.Duration) *perfStreams {
	return &perfStreams{ctx: ctx, wait: wait, streams: map[*grpc.ClientConn]*perfStream{}}
}

// produce sends req on conn's stream and waits for its answer. A request
// the broker refused with a status comes back as that status error, as
// from a unary Produce; a broken stream is dropped (the next request opens
// another) and its error returned.
func (p *perfStreams) produce(conn *grpc.ClientConn, req *replicadv1.ProduceRequest) (*replicadv1.ProduceResponse, error) {
	ps, ok := p.streams[conn]
	if !ok {
		ctx, cancel := context.WithCancel(p.ctx)
		s, err := replicadv1.NewLogServiceClient(conn).ProduceStream(ctx)
		if err != nil {
			cancel()
			return nil, err
		}
		ps = &perfStream{s: s, cancel: cancel, timer: time.AfterFunc(time.Hour, cancel)}
		ps.timer.Stop()
		p.streams[conn] = ps
	}
	ps.timer.Reset(p.wait)
	// Send answers io.EOF when the stream has ended: Recv then says why.
	var resp *replicadv1.ProduceResponse
	err := ps.s.Send(req)
	if err == nil || errors.Is(err, io.EOF) {
		resp, err = ps.s.Recv()
	}
	if !ps.timer.Stop() && err == nil {
		// The timer fired as the answer came: the stream is cancelled.
		err = status.Error(codes.DeadlineExceeded, "no answer on the ProduceStream in time")
	}
	if err != nil {
		ps.cancel()
		delete(p.streams, conn)
		return nil, err
	}
	if c := codes.Code(resp.GetStatusCode()); c != codes.OK {
		return nil, status.Error(c, resp.GetErrorMessage())
	}
	return resp, nil
}

func (p *perfStreams) close() {
	for conn, ps := range p.streams {
		_ = ps.s.CloseSend()
		ps.timer.Stop()
		ps.cancel()
		delete(p.streams, conn)
	}
}
