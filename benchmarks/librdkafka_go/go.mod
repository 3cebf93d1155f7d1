module msgstream/benchmarks/librdkafka_go

go 1.21

require github.com/confluentinc/confluent-kafka-go v1.9.1
