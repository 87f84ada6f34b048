package grpcx

import (
	"fmt"
	"math/bits"
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// BufferPool is the buffer pool of replicad's gRPC servers and clients
// (ServerOptions, DialOptions) and of its proto codec, in place of gRPC's
// default in two ways:
//
//   - It keeps no buffer over 1 MiB: a larger one (a Consume answer of up to
//     50 MiB, a follower's of 10 MiB) is allocated for its message and left
//     to the GC. The default pool keeps those in a sync.Pool, where they
//     outlived their answers and escaped the response budget: under a flood
//     of large reads they were most of a broker's live heap.
//   - It does not clear the buffers it hands out. gRPC's default clears the
//     whole of each (a 1 MiB buffer for a 300 KiB message): that was 21% of
//     a TLS leader's CPU under an acks=all producer. Every user here writes
//     a buffer before reading it: the codec marshals exactly the message's
//     size into it, or copies exactly the received bytes, and the transport
//     reads exactly a frame's length into it.
var BufferPool mem.BufferPool = newTieredPool()

// maxPooledBuffer is the largest buffer kept.
const maxPooledBuffer = 1 << 20

// poolTiers are the sizes kept, as powers of two: 4 KiB (a page) to 1 MiB.
const minTierShift, maxTierShift = 12, 20

// tieredPool keeps buffers by power-of-two capacity, without clearing them.
type tieredPool struct {
	tiers [maxTierShift - minTierShift + 1]sync.Pool
}

func newTieredPool() *tieredPool { return &tieredPool{} }

// tierFor is the index of the smallest tier holding n bytes; ok is false
// above maxPooledBuffer.
func tierFor(n int) (int, bool) {
	if n > maxPooledBuffer {
		return 0, false
	}
	shift := max(minTierShift, bits.Len(uint(max(n, 1)-1)))
	return shift - minTierShift, true
}

func (p *tieredPool) Get(n int) *[]byte {
	t, ok := tierFor(n)
	if !ok {
		b := make([]byte, n)
		return &b
	}
	if b, _ := p.tiers[t].Get().(*[]byte); b != nil {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(t+minTierShift))
	return &b
}

func (p *tieredPool) Put(b *[]byte) {
	c := cap(*b)
	if c > maxPooledBuffer || c < 1<<minTierShift {
		return
	}
	// The largest tier whose size c covers, so a Get of that tier's size
	// fits whatever it is handed.
	t := bits.Len(uint(c)) - 1 - minTierShift
	p.tiers[t].Put(b)
}

// The proto codec is gRPC's own but for its pool: gRPC's marshals into
// mem.DefaultBufferPool whatever the server's buffer pool option says.
func init() { encoding.RegisterCodecV2(protoCodec{}) }

type protoCodec struct{}

func (protoCodec) Name() string { return "proto" }

func (protoCodec) Marshal(v any) (mem.BufferSlice, error) {
	m := protoMessage(v)
	if m == nil {
		return nil, fmt.Errorf("proto: cannot marshal %T, not a proto.Message", v)
	}
	size := proto.Size(m)
	// UseCachedSize reuses the Size just computed (the message is not
	// changed in between).
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := BufferPool.Get(size)
	out, err := opts.MarshalAppend((*buf)[:0], m)
	if err == nil && (len(out) != size || &out[0] != &(*buf)[0]) {
		// The buffer is not cleared: bytes past what was marshaled, or a
		// reallocation, would send another message's bytes.
		err = fmt.Errorf("proto: marshaled %d bytes of %T into a %d-byte buffer", len(out), v, size)
	}
	if err != nil {
		BufferPool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, BufferPool)}, nil
}

func (protoCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m := protoMessage(v)
	if m == nil {
		return fmt.Errorf("proto: cannot unmarshal into %T, not a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(BufferPool)
	defer buf.Free()
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

func protoMessage(v any) proto.Message {
	switch v := v.(type) {
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(v)
	case protoadapt.MessageV2:
		return v
	}
	return nil
}
