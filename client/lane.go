package client

import (
	"context"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// lane carries a partition's batches to its leader: a ProduceStream (the
// leader answers its requests one at a time, in order, so pipelined
// batches keep their order) or, with ProducerConfig.Unary, one unary
// Produce at a time.
type lane struct {
	addr   string
	unary  bool
	stream replicadv1.LogService_ProduceStreamClient
	cancel context.CancelFunc
	n      int  // batches in flight
	dead   bool // closed: answers still arriving are dropped
	client replicadv1.LogServiceClient
}

func openLane(q *partition, addr string) (*lane, error) {
	conn, err := q.p.c.conn(addr)
	if err != nil {
		return nil, err
	}
	l := &lane{addr: addr, unary: q.p.cfg.Unary, client: replicadv1.NewLogServiceClient(conn)}
	if l.unary {
		return l, nil
	}
	ctx, cancel := context.WithCancel(q.p.ctx)
	s, err := l.client.ProduceStream(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	l.stream, l.cancel = s, cancel
	q.p.wg.Add(1)
	go func() {
		defer q.p.wg.Done()
		for {
			resp, err := s.Recv()
			if q.p.ctx.Err() != nil {
				return
			}
			q.onResult(result{lane: l, resp: resp, err: err})
			if err != nil {
				return
			}
		}
	}()
	return l, nil
}

// send puts b on the lane; its answer comes to q.onResult.
func (l *lane) send(q *partition, b *batch) error {
	l.n++
	req := q.request(b)
	if l.unary {
		ctx, cancel := q.p.c.requestContext(q.p.ctx, max(q.p.cfg.AckTimeout, 0))
		q.p.wg.Add(1)
		go func() {
			defer q.p.wg.Done()
			defer cancel()
			resp, err := l.client.Produce(ctx, req)
			if q.p.ctx.Err() == nil {
				q.onResult(result{lane: l, b: b, resp: resp, err: err})
			}
		}()
		return nil
	}
	// io.EOF: the stream ended; the receiver reports why, but this
	// lane is given up at once.
	return l.stream.Send(req)
}

func (l *lane) close() {
	if l.dead {
		return
	}
	l.dead = true
	if l.stream != nil {
		_ = l.stream.CloseSend()
		l.cancel()
	}
}
