// A KafkaConsumer with group.protocol=consumer (KIP-848) for test_consumer_group_protocol.py.
//
// Usage: Kip848Consumer <bootstrap> <topic> <group> <client-id>
// Prints one line per event on stdout, flushed at once:
//   ASSIGNMENT p,p,...       the whole assignment after every change (from the rebalance listener)
//   RECORD partition offset value
//   COMMITTED                after each synchronous commit that stored something
// It polls, commits synchronously after every poll that returned records, and on a
// line "stop" on stdin closes (which leaves the group with member epoch -1) and exits.

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.io.BufferedReader;
import java.io.InputStreamReader;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class Kip848Consumer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(ConsumerConfig.GROUP_ID_CONFIG, args[2]);
        props.put(ConsumerConfig.CLIENT_ID_CONFIG, args[3]);
        props.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());

        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("stop")) break;
                }
            } catch (Exception e) {
                // stdin closed: stop as well
            }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();

        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(args[1]), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                    if (!partitions.isEmpty()) {
                        consumer.commitSync();
                    }
                    report(consumer.assignment(), partitions, null);
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                    report(consumer.assignment(), null, partitions);
                }

                private void report(Set<TopicPartition> now, Collection<TopicPartition> revoked,
                                    Collection<TopicPartition> added) {
                    Set<Integer> parts = new TreeSet<>();
                    for (TopicPartition tp : now) parts.add(tp.partition());
                    if (revoked != null) for (TopicPartition tp : revoked) parts.remove(tp.partition());
                    if (added != null) for (TopicPartition tp : added) parts.add(tp.partition());
                    StringBuilder sb = new StringBuilder("ASSIGNMENT ");
                    boolean first = true;
                    for (int p : parts) {
                        if (!first) sb.append(',');
                        sb.append(p);
                        first = false;
                    }
                    System.out.println(sb);
                    System.out.flush();
                }
            });
            while (!stop.get()) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : records) {
                    System.out.println("RECORD " + r.partition() + " " + r.offset() + " " + r.value());
                }
                if (!records.isEmpty()) {
                    consumer.commitSync();
                    System.out.println("COMMITTED");
                }
                System.out.flush();
            }
        }
        System.out.println("CLOSED");
        System.out.flush();
    }
}
