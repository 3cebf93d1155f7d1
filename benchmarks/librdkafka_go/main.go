// Raw librdkafka's pipelined produce rate on a broker: the reference for how many
// records a second the broker and the machine take when the client costs next to nothing.
//
//	go run . -b HOST:PORT -t TOPIC [-n 500000] [-s 320] [-pack 0] [-linger 0]
//
// confluent-kafka-go v1.9.1 links its own librdkafka (1.9.1), so nothing else needs
// installing. Settings match benchmarks/bench_kafka.py: acks=all, linger.ms=0, no
// compression, one partition. -pack N waits for every N records' reports before sending
// more (the msgstream harness's pipelined figure keeps one 1,000-record pack in flight);
// 0 keeps sending. The topic must exist (the local test broker does not create topics).
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/confluentinc/confluent-kafka-go/kafka"
)

func main() {
	bootstrap := flag.String("b", "", "bootstrap servers (required)")
	topic := flag.String("t", "", "topic, one partition (required)")
	count := flag.Int("n", 500000, "records")
	size := flag.Int("s", 320, "record size in bytes")
	pack := flag.Int("pack", 0, "records per awaited pack (0: no waiting)")
	linger := flag.String("linger", "0", "linger.ms")
	flag.Parse()
	if *bootstrap == "" || *topic == "" {
		flag.Usage()
		os.Exit(2)
	}
	producer, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":            *bootstrap,
		"acks":                         "all",
		"linger.ms":                    *linger,
		"compression.type":             "none",
		"queue.buffering.max.messages": 1000000,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer producer.Close()
	partition := kafka.TopicPartition{Topic: topic, Partition: 0}
	payload := make([]byte, *size)
	reports := make(chan kafka.Event, 1000000)
	send := func() {
		for producer.Produce(&kafka.Message{TopicPartition: partition, Value: payload}, reports) != nil {
			time.Sleep(100 * time.Microsecond) // local queue full: let reports drain
		}
	}
	await := func(n int) {
		for i := 0; i < n; i++ {
			if m := (<-reports).(*kafka.Message); m.TopicPartition.Error != nil {
				fmt.Fprintln(os.Stderr, m.TopicPartition.Error)
				os.Exit(1)
			}
		}
	}
	send() // connection and metadata before the clock starts
	await(1)
	step := *pack
	if step <= 0 {
		step = *count
	}
	start := time.Now()
	for sent := 0; sent < *count; sent += step {
		n := min(step, *count-sent)
		for i := 0; i < n; i++ {
			send()
		}
		await(n)
	}
	elapsed := time.Since(start).Seconds()
	_, version := kafka.LibraryVersion()
	fmt.Printf("librdkafka %s (Go): %d records of %d B, pack %d, linger.ms=%s: %.0f records/s\n",
		version, *count, *size, *pack, *linger, float64(*count)/elapsed)
}
