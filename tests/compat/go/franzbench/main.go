// Command franzbench consumes (or produces) N records as fast as franz-go's kgo client can, and prints one
// JSON line with the figures; the Go load generator of `tinystream bench consume|compare --client franz`.
//
// It is modelled on franz-go's own examples/bench: one kgo client, direct partition consuming (no group,
// so no join to time) from the start of every partition, records counted in PollFetches. Unlike that
// example it stops after -records records and prints one result instead of a rate every second:
//
//	franzbench -brokers 127.0.0.1:9092 -topic t -records 2000000 [-ca ca.pem] [-fetch-bytes 8388608]
//	franzbench -produce -brokers 127.0.0.1:9092 -topic t -records 2000000 -record-bytes 100 [-compression lz4]
//
// The clock starts before the first poll (metadata and the start offsets are in it, as they are in
// ConsumerPerformance's fetch time) and stops at the poll that brings the last record. Output, stdout:
//
//	{"operation":"consume","records":2000000,"bytes":200000000,"seconds":1.9,"cpu_seconds":1.7,"records_per_s":...,"mb_per_s":...,"polls":412}
//
// Exit status 0 when -records records were read (or produced) before -timeout, 1 otherwise, 2 on a bad flag.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type result struct {
	Operation   string  `json:"operation"`
	Records     int64   `json:"records"`
	Bytes       int64   `json:"bytes"`
	Seconds     float64 `json:"seconds"`
	CPUSeconds  float64 `json:"cpu_seconds"` // this process's user + system CPU over the same window
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	Polls       int64   `json:"polls"`
	Error       string  `json:"error,omitempty"`
}

var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

func main() {
	brokers := flag.String("brokers", "", "comma-separated host:port list (required)")
	topic := flag.String("topic", "", "topic to consume from or produce to (required)")
	records := flag.Int64("records", 0, "records to consume or produce (required, > 0)")
	produce := flag.Bool("produce", false, "produce -records records instead of consuming")
	recordBytes := flag.Int("record-bytes", 100, "value bytes per produced record")
	compression := flag.String("compression", "none", "codec of produced batches: none, gzip, snappy, lz4, zstd")
	batchBytes := flag.Int("batch-bytes", 1000000, "largest produced batch per partition (producer batch.max.bytes)")
	caFile := flag.String("ca", "", "PEM CA file: connect over TLS and trust this CA")
	fetchBytes := flag.Int("fetch-bytes", 8<<20, "per-partition fetch size (max.partition.fetch.bytes)")
	maxBytes := flag.Int("max-bytes", 64<<20, "per-response fetch size (fetch.max.bytes)")
	concurrentFetches := flag.Int("concurrent-fetches", 0, "fetches in flight at once across brokers (0: kgo's default, no limit)")
	timeout := flag.Duration("timeout", 120*time.Second, "give up after this long")
	debug := flag.Bool("debug", false, "log kgo's connections and requests (debug level) to stderr")
	cpuProfile := flag.String("cpuprofile", "", "write a Go CPU profile of the run to this file (go tool pprof)")
	flag.Parse()
	if *brokers == "" || *topic == "" || *records <= 0 || *recordBytes < 0 {
		fmt.Fprintln(os.Stderr, "franzbench: -brokers, -topic and -records > 0 are required")
		os.Exit(2)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.ClientID("franzbench"),
		kgo.FetchMaxPartitionBytes(int32(*fetchBytes)),
		kgo.FetchMaxBytes(int32(*maxBytes)),
	}
	if *debug {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	if *concurrentFetches > 0 {
		opts = append(opts, kgo.MaxConcurrentFetches(*concurrentFetches))
	}
	if *caFile != "" {
		config, err := tlsConfig(*caFile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "franzbench:", err)
			os.Exit(2)
		}
		opts = append(opts, kgo.DialTLSConfig(config))
	}
	if *produce {
		codec, ok := codecs[*compression]
		if !ok {
			fmt.Fprintln(os.Stderr, "franzbench: unknown -compression", *compression)
			os.Exit(2)
		}
		opts = append(opts, kgo.DefaultProduceTopic(*topic), kgo.RequiredAcks(kgo.LeaderAck()),
			kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(codec),
			kgo.ProducerBatchMaxBytes(int32(*batchBytes)), kgo.MaxBufferedRecords(250<<20/(*recordBytes+1)+1))
	} else {
		opts = append(opts, kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	}
	client, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "franzbench:", err)
		os.Exit(2)
	}
	defer client.Close()
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "franzbench:", err)
			os.Exit(2)
		}
		defer stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var r result
	if *produce {
		r = runProduce(ctx, client, *records, *recordBytes)
	} else {
		r = runConsume(ctx, client, *records)
	}
	if r.Seconds > 0 {
		r.RecordsPerS = float64(r.Records) / r.Seconds
		r.MBPerS = float64(r.Bytes) / r.Seconds / 1e6
	}
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
	if r.Error != "" || r.Records < *records {
		os.Exit(1)
	}
}

// startCPUProfile profiles this process until the returned function is called: where the client's own
// CPU goes, when a run says the client set the pace.
func startCPUProfile(path string) (func(), error) {
	file, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(file); err != nil {
		file.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); file.Close() }, nil
}

func tlsConfig(caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}

// runConsume polls until `goal` records have come (value bytes counted), the deadline passes or a
// partition reports an error.
func runConsume(ctx context.Context, client *kgo.Client, goal int64) result {
	r := result{Operation: "consume"}
	start, cpuStart := time.Now(), processCPU()
	for r.Records < goal {
		fetches := client.PollFetches(ctx)
		r.Polls++
		if err := fetchError(fetches); err != nil {
			r.Error = err.Error()
			break
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			r.Records++
			r.Bytes += int64(len(rec.Value))
		})
	}
	r.Seconds, r.CPUSeconds = time.Since(start).Seconds(), processCPU()-cpuStart
	return r
}

// processCPU is the CPU time (user + system, all threads) this process has used so far, in seconds: with it
// a run says whether the load generator, on the same cores as the broker, was what set the pace.
func processCPU() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano()).Seconds()
}

func fetchError(fetches kgo.Fetches) error {
	var first error
	fetches.EachError(func(topic string, partition int32, err error) {
		switch {
		case first != nil:
		case topic == "": // the client's own error (a deadline, a closed client), not a partition's
			first = err
		default:
			first = fmt.Errorf("%s-%d: %w", topic, partition, err)
		}
	})
	if first == nil && errors.Is(fetches.Err0(), context.DeadlineExceeded) {
		first = fetches.Err0()
	}
	return first
}

// runProduce produces `goal` records of `size` value bytes (acks=1, not idempotent) and waits for every ack.
func runProduce(ctx context.Context, client *kgo.Client, goal int64, size int) result {
	r := result{Operation: "produce"}
	var acked, bytes int64
	var failure atomic.Value
	value := make([]byte, size)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	start, cpuStart := time.Now(), processCPU()
	for i := int64(0); i < goal && ctx.Err() == nil; i++ {
		client.Produce(ctx, &kgo.Record{Value: value}, func(rec *kgo.Record, err error) {
			if err != nil {
				failure.CompareAndSwap(nil, err.Error())
				return
			}
			atomic.AddInt64(&acked, 1)
			atomic.AddInt64(&bytes, int64(len(rec.Value)))
		})
	}
	if err := client.Flush(ctx); err != nil {
		failure.CompareAndSwap(nil, err.Error())
	}
	r.Seconds, r.CPUSeconds = time.Since(start).Seconds(), processCPU()-cpuStart
	r.Records, r.Bytes = atomic.LoadInt64(&acked), atomic.LoadInt64(&bytes)
	if text, ok := failure.Load().(string); ok {
		r.Error = text
	}
	return r
}
