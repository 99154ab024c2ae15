// Command kadmcheck runs franz-go's admin client (kadm) against one cluster and prints one JSON object.
//
// It is the Go peer of tests/compat/test_kadm.py: the same steps run against TinyStream and Apache
// Kafka, and the test asserts the same outcomes on both. Each step records the call, its error (empty
// when it worked) and what it read back, normalised so that the two brokers can be compared (broker ids,
// not addresses; config sources by name; Kafka's error names from kerr).
//
//	kadmcheck -bootstrap 127.0.0.1:9092,127.0.0.1:9093 -topic kadm-x -client-id kadm-x
//
// Needs at least two brokers (the reassignment reverses a partition's two replicas). Exit status 0
// unless a flag is wrong or no broker answers: a failing call is a result, not a crash.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// step is one kadm call: its error name ("" when it worked) and what it read back.
type step struct {
	Call   string `json:"call"`
	Error  string `json:"error"`
	Result any    `json:"result,omitempty"`
}

type report struct {
	Steps []step `json:"steps"`
}

func (r *report) add(call string, err error, result any) {
	r.Steps = append(r.Steps, step{Call: call, Error: errName(err), Result: result})
}

// errName is Kafka's error name when the error is one (UNKNOWN_TOPIC_OR_PARTITION ...), else the text.
func errName(err error) string {
	if err == nil {
		return ""
	}
	var kafkaErr *kerr.Error
	if errors.As(err, &kafkaErr) {
		return kafkaErr.Message
	}
	return err.Error()
}

func main() {
	bootstrap := flag.String("bootstrap", "", "comma-separated host:port list")
	topic := flag.String("topic", "kadmcheck", "topic to create, reassign and delete")
	clientID := flag.String("client-id", "kadmcheck-quota", "client-id whose quotas are set and removed")
	timeout := flag.Duration("timeout", 60*time.Second, "deadline of each call")
	flag.Parse()
	if *bootstrap == "" {
		fmt.Fprintln(os.Stderr, "kadmcheck: -bootstrap is required")
		os.Exit(2)
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*bootstrap, ",")...), kgo.ClientID("kadmcheck"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "kadmcheck:", err)
		os.Exit(2)
	}
	defer client.Close()
	adm := kadm.NewClient(client)
	r := &report{}
	run(adm, r, *topic, *clientID, *timeout)
	out, _ := json.Marshal(r)
	fmt.Println(string(out))
}

func ctxFor(timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), timeout)
}

func run(adm *kadm.Client, r *report, topic, clientID string, timeout time.Duration) {
	ctx, cancel := ctxFor(timeout)
	defer cancel()

	brokers, err := adm.ListBrokers(ctx)
	ids := brokers.NodeIDs()
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	r.add("ListBrokers", err, map[string]any{"broker_ids": ids})
	if err != nil {
		return
	}

	meta, err := adm.BrokerMetadata(ctx)
	r.add("BrokerMetadata", err, map[string]any{"brokers": len(meta.Brokers),
		"controller_is_a_broker": containsID(ids, meta.Controller)})

	created, err := adm.CreateTopic(ctx, 2, 2, nil, topic)
	r.add("CreateTopic", err, map[string]any{"topic": created.Topic, "partitions": created.NumPartitions,
		"replication_factor": created.ReplicationFactor})
	if err != nil {
		return
	}
	before := waitReplicas(ctx, adm, topic, 0, func(p kadm.PartitionDetail) bool {
		return len(p.Replicas) == 2 && p.Leader == p.Replicas[0]
	})

	// Reverse partition 0's replicas: no data moves, but the preferred leader is now the other broker.
	reversed := []int32{before.Replicas[1], before.Replicas[0]}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, reversed)
	altered, err := adm.AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = altered.Error()
	}
	r.add("AlterPartitionAssignments", err, map[string]any{"partitions": len(altered)})

	after := waitReplicas(ctx, adm, topic, 0, func(p kadm.PartitionDetail) bool {
		return equalIDs(p.Replicas, reversed)
	})
	listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	pending := 0
	listed.Each(func(l kadm.ListPartitionReassignmentsResponse) {
		if len(l.AddingReplicas)+len(l.RemovingReplicas) > 0 {
			pending++
		}
	})
	r.add("ListPartitionReassignments", err, map[string]any{"pending": pending,
		"replicas_are_the_new_order": equalIDs(after.Replicas, reversed),
		"leader_is_the_old_one":      after.Leader == before.Replicas[0]})

	elected, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	byPartition := map[string]string{}
	for _, ps := range elected {
		for p, res := range ps {
			byPartition[fmt.Sprint(p)] = orNone(errName(res.Err))
		}
	}
	moved := waitReplicas(ctx, adm, topic, 0, func(p kadm.PartitionDetail) bool { return p.Leader == reversed[0] })
	r.add("ElectLeaders", err, map[string]any{"partitions": byPartition,
		"leader_is_the_new_preferred": moved.Leader == reversed[0]})

	dirs, err := adm.DescribeAllLogDirs(ctx, kadm.TopicsSet{topic: {0: {}, 1: {}}})
	dirs.Each(func(d kadm.DescribedLogDir) {
		if err == nil && d.Err != nil {
			err = d.Err
		}
	})
	holders := map[string][]int32{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			key := fmt.Sprint(p.Partition)
			holders[key] = append(holders[key], p.Broker)
		})
	})
	details := topicDetails(ctx, adm, topic)
	matches := map[string]bool{}
	for p, part := range details.Partitions {
		matches[fmt.Sprint(p)] = sameSet(holders[fmt.Sprint(p)], part.Replicas)
	}
	r.add("DescribeAllLogDirs", err, map[string]any{"brokers_answering": len(dirs),
		"partition_on_its_replicas": matches})

	quotas(ctx, adm, r, clientID)
	brokerConfigs(ctx, adm, r, ids[0])

	deleted, err := adm.DeleteTopics(ctx, topic)
	if err == nil {
		err = deleted.Error()
	}
	gone := false
	for i := 0; i < 60 && err == nil; i++ {
		listedTopics, lerr := adm.ListTopics(ctx, topic)
		if lerr == nil && !listedTopics.Has(topic) {
			gone = true
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	r.add("DeleteTopics", err, map[string]any{"gone_from_metadata": gone})
}

func quotas(ctx context.Context, adm *kadm.Client, r *report, clientID string) {
	entity := kadm.ClientQuotaEntity{{Type: "client-id", Name: &clientID}}
	match := []kadm.DescribeClientQuotaComponent{{Type: "client-id", MatchName: &clientID,
		MatchType: 0 /* exact */}}
	set, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{
		{Key: "producer_byte_rate", Value: 1048576}, {Key: "consumer_byte_rate", Value: 2097152}}}})
	r.add("AlterClientQuotas(set)", firstErr(err, set), map[string]any{"entities": len(set)})
	// Kafka applies an alteration through its metadata log, so a describe may first see the old state.
	describe := func(wantSet bool) (map[string]float64, error) {
		var values map[string]float64
		var err error
		for i := 0; i < 40; i++ {
			var described kadm.DescribedClientQuotas
			described, err = adm.DescribeClientQuotas(ctx, true, match)
			values = quotaValues(described)
			if err == nil && (len(values) > 0) == wantSet {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		return values, err
	}
	values, err := describe(true)
	r.add("DescribeClientQuotas(after set)", err, values)
	removed, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: entity, Ops: []kadm.AlterClientQuotaOp{
		{Key: "producer_byte_rate", Remove: true}, {Key: "consumer_byte_rate", Remove: true}}}})
	r.add("AlterClientQuotas(remove)", firstErr(err, removed), map[string]any{"entities": len(removed)})
	values, err = describe(false)
	r.add("DescribeClientQuotas(after remove)", err, values)
}

func firstErr(err error, altered kadm.AlteredClientQuotas) error {
	if err != nil {
		return err
	}
	for _, a := range altered {
		if a.Err != nil {
			return a.Err
		}
	}
	return nil
}

func quotaValues(described kadm.DescribedClientQuotas) map[string]float64 {
	values := map[string]float64{}
	for _, d := range described {
		for _, v := range d.Values {
			values[v.Key] = v.Value
		}
	}
	return values
}

// brokerConfigs sets message.max.bytes on one broker (a per-broker dynamic config both brokers take),
// reads it back, deletes it and reads the default back.
func brokerConfigs(ctx context.Context, adm *kadm.Client, r *report, broker int32) {
	const name, value = "message.max.bytes", "2000000"
	readOnce := func() (map[string]string, error) {
		described, err := adm.DescribeBrokerConfigs(ctx, broker)
		if err != nil {
			return nil, err
		}
		config, err := described.On(fmt.Sprint(broker), nil)
		if err != nil {
			return nil, err
		}
		if config.Err != nil {
			return nil, config.Err
		}
		for _, c := range config.Configs {
			if c.Key == name {
				return map[string]string{"value": c.MaybeValue(), "source": c.Source.String()}, nil
			}
		}
		return map[string]string{}, nil
	}
	// As with quotas, the broker may answer from before the alteration reached it: read until it shows.
	// Both the source and the value: Kafka 4.3.1 was seen (under load) answering a deleted config with
	// source DEFAULT_CONFIG but the deleted value for a while, its synonyms updated before its config.
	read := func(dynamic bool) (map[string]string, error) {
		var got map[string]string
		var err error
		for i := 0; i < 120; i++ {
			got, err = readOnce()
			if err == nil && (got["source"] == "DYNAMIC_BROKER_CONFIG") == dynamic && (got["value"] == value) == dynamic {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		return got, err
	}
	before, err := read(false)
	r.add("DescribeBrokerConfigs(before)", err, before)
	v := value
	altered, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: &v}}, broker)
	r.add("AlterBrokerConfigs(set)", alterErr(err, altered), nil)
	during, err := read(true)
	r.add("DescribeBrokerConfigs(after set)", err, during)
	altered, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: name}}, broker)
	r.add("AlterBrokerConfigs(delete)", alterErr(err, altered), nil)
	after, err := read(false)
	r.add("DescribeBrokerConfigs(after delete)", err, after)
}

func alterErr(err error, altered kadm.AlterConfigsResponses) error {
	if err != nil {
		return err
	}
	for _, a := range altered {
		if a.Err != nil {
			return a.Err
		}
	}
	return nil
}

func topicDetails(ctx context.Context, adm *kadm.Client, topic string) kadm.TopicDetail {
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return kadm.TopicDetail{}
	}
	return topics[topic]
}

// waitReplicas polls Metadata until partition p of topic satisfies ok (or ~30 s pass) and returns it.
func waitReplicas(ctx context.Context, adm *kadm.Client, topic string, p int32,
	ok func(kadm.PartitionDetail) bool) kadm.PartitionDetail {
	var last kadm.PartitionDetail
	for i := 0; i < 60; i++ {
		if part, found := topicDetails(ctx, adm, topic).Partitions[p]; found {
			last = part
			if ok(part) {
				return part
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return last
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sameSet(a, b []int32) bool {
	x := append([]int32(nil), a...)
	y := append([]int32(nil), b...)
	sort.Slice(x, func(i, j int) bool { return x[i] < x[j] })
	sort.Slice(y, func(i, j int) bool { return y[i] < y[j] })
	return equalIDs(x, y)
}

func orNone(s string) string {
	if s == "" {
		return "NONE"
	}
	return s
}
