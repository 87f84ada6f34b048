package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/replicad/replicad/client"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
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

// An operator's round through the controllers: is the cluster healthy,
// move the preferred leaders back, and spread a topic over a new broker
// with a Kafka-format plan, following the moves to the end.
func ExampleAdmin() {
	ctx := context.Background()
	adm, err := client.NewAdmin(client.AdminConfig{Controllers: []string{"127.0.0.1:9090", "127.0.0.1:9190"}})
	if err != nil {
		log.Fatal(err)
	}
	defer adm.Close()

	h, err := adm.ClusterHealth(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("healthy:", h.Healthy, h.UnhealthyReasons, "down:", h.BrokersDown)

	results, err := adm.ElectPreferredLeaders(ctx, "orders", nil)
	if err != nil {
		log.Fatal(err) // client.IsMaybeApplied(err): a batch may have been applied
	}
	fmt.Println(len(results), "partitions asked")

	cluster, err := adm.DescribeCluster(ctx)
	if err != nil {
		log.Fatal(err)
	}
	var parts []*replicadv1.ClusterPartition
	for _, p := range cluster.GetPartitions() {
		if p.GetTopic() == "orders" {
			parts = append(parts, p)
		}
	}
	plan, err := client.GeneratePlan(parts, []int32{1, 2, 3, 4})
	if err != nil {
		log.Fatal(err)
	}
	ix := client.IndexCluster(cluster)
	if err := client.ValidatePlan(plan, ix); err != nil {
		log.Fatal(err) // a *client.PlanError naming every bad entry
	}
	_, moves := client.PlanMoves(plan, ix)
	if _, failed := adm.StartReassignments(ctx, moves); len(failed) > 0 {
		log.Fatal(failed[0].Err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if _, err := adm.WaitReassignments(wctx, plan, time.Second, func(progress []client.PlanProgress) {
		for _, pp := range progress {
			fmt.Println(pp) // "orders-0: in progress: adding 4: ISR 1,2,3, waiting for 4"
		}
	}); err != nil {
		log.Fatal(err) // the moves go on; CancelReassignments stops them
	}
}
