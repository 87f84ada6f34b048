package fetcher

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// ErrStreamClosed is returned by an in-memory stream after Close.
var ErrStreamClosed = errors.New("fetcher: stream closed")

// InmemClient is a LeaderClient that calls FetchHandlers in process, by
// leader broker id: for tests of the fetcher and of brokers wired together
// without a network. Open fails for a broker with no handler, as a dial to a
// dead broker would.
type InmemClient struct {
	mu       sync.Mutex
	handlers map[int32]FetchHandler
	opens    int
}

// NewInmemClient returns a client with no leaders.
func NewInmemClient() *InmemClient {
	return &InmemClient{handlers: make(map[int32]FetchHandler)}
}

// Register makes h answer the streams opened to broker id; nil unregisters.
func (c *InmemClient) Register(id int32, h FetchHandler) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h == nil {
		delete(c.handlers, id)
		return
	}
	c.handlers[id] = h
}

// Opens counts the streams opened so far.
func (c *InmemClient) Opens() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opens
}

// Open implements LeaderClient.
func (c *InmemClient) Open(ctx context.Context, leader core.Broker) (FetchStream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.handlers[leader.ID]
	if !ok {
		return nil, fmt.Errorf("fetcher: no in-memory leader %d", leader.ID)
	}
	c.opens++
	ctx, cancel := context.WithCancel(ctx)
	return &inmemStream{ctx: ctx, cancel: cancel, handler: h}, nil
}

// inmemStream runs the handler in Recv, on the fetcher's goroutine: the
// fetcher sends one request and waits for its answer, so nothing is lost
// by not having a second goroutine.
type inmemStream struct {
	ctx     context.Context
	cancel  context.CancelFunc
	handler FetchHandler

	mu      sync.Mutex
	pending []*replicadv1.FetchRequest
	err     error // sticky: a broken stream stays broken
}

func (s *inmemStream) Send(req *replicadv1.FetchRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.errLocked(); err != nil {
		return err
	}
	s.pending = append(s.pending, req)
	return nil
}

func (s *inmemStream) Recv() (*replicadv1.FetchResponse, error) {
	s.mu.Lock()
	if err := s.errLocked(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if len(s.pending) == 0 {
		s.mu.Unlock()
		return nil, errors.New("fetcher: recv with no request outstanding")
	}
	req := s.pending[0]
	s.pending = s.pending[1:]
	s.mu.Unlock()

	resp, err := s.handler.Fetch(s.ctx, req)
	if err == nil && s.ctx.Err() != nil {
		err = s.ctx.Err()
	}
	if err != nil {
		s.mu.Lock()
		if s.err == nil {
			s.err = err
		}
		s.mu.Unlock()
		return nil, err
	}
	return resp, nil
}

func (s *inmemStream) errLocked() error {
	if s.err != nil {
		return s.err
	}
	if s.ctx.Err() != nil {
		return ErrStreamClosed
	}
	return nil
}

func (s *inmemStream) Close() { s.cancel() }
