package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/replicad/replicad/client"
)

// A producer with the defaults: idempotent, acks=all, records spread by
// key. The brokers are found through any of the bootstrap addresses.
func ExampleProducer() {
	cl, err := client.New(client.Config{Bootstrap: []string{"127.0.0.1:9091", "127.0.0.1:9092"}})
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	p, err := client.NewProducer(cl, client.ProducerConfig{Linger: 5 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	ctx := context.Background()
	// Asynchronously: the callback gets each record's outcome.
	p.Produce(ctx, &client.Record{Topic: "orders", Key: []byte("customer-7"), Value: []byte("book")},
		func(r *client.Record, err error) {
			if err != nil {
				log.Printf("not delivered: %v", err)
				return
			}
			fmt.Printf("partition %d offset %d\n", r.Partition, r.Offset)
		})
	// Synchronously: returns when every record is delivered (or failed).
	if err := p.ProduceSync(ctx, &client.Record{Topic: "orders", Value: []byte("pen")}); err != nil {
		log.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}
}

// One partition, explicitly, with plain (non-idempotent) batches and
// acks=1.
func ExampleProducerConfig_plain() {
	cl, err := client.New(client.Config{Broker: "127.0.0.1:9091"})
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Close()
	p, err := client.NewProducer(cl, client.ProducerConfig{DisableIdempotence: true, Acks: client.AcksLeader})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	err = p.ProduceSync(context.Background(), &client.Record{Topic: "orders", Partition: 2, ManualPartition: true, Value: []byte("x")})
	if err != nil {
		log.Fatal(err)
	}
}

// Where a key goes among 6 partitions, as Kafka's default partitioner
// would put it.
func ExampleKeyPartition() {
	fmt.Println(client.KeyPartition([]byte("customer-7"), 6))
	fmt.Println(client.KeyPartition([]byte("21"), 3))
	// Output:
	// 1
	// 0
}
