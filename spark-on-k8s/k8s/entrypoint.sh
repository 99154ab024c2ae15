#!/bin/bash
# Spark's Kubernetes pod contract, as in Apache Spark's
# resource-managers/kubernetes/docker/src/main/dockerfiles/spark/entrypoint.sh:
# spark-submit (cluster mode) and the Spark Operator start the driver pod with
# `driver <spark-submit args>` and executor pods with `executor`, passing the
# rest through SPARK_* environment variables.
set -eo pipefail

SPARK_CLASSPATH="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}${SPARK_HOME}/jars/*"
if [ -n "${HADOOP_CONF_DIR:-}" ]; then SPARK_CLASSPATH="$HADOOP_CONF_DIR:$SPARK_CLASSPATH"; fi
if [ -n "${SPARK_CONF_DIR:-}" ]; then SPARK_CLASSPATH="$SPARK_CONF_DIR:$SPARK_CLASSPATH"; fi

# Executor JVM options arrive as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... (in order).
SPARK_EXECUTOR_JAVA_OPTS=()
while IFS= read -r opt; do
  [ -n "$opt" ] && SPARK_EXECUTOR_JAVA_OPTS+=("$opt")
done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/[^=]*=\(.*\)/\1/g')

case "${1:-}" in
  driver)
    shift 1
    CMD=(
      "$SPARK_HOME/bin/spark-submit"
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS}"
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS}"
      --deploy-mode client
      "$@"
    )
    ;;
  executor)
    shift 1
    CMD=(
      "${JAVA_HOME}/bin/java"
      "${SPARK_EXECUTOR_JAVA_OPTS[@]}"
      -Xms"${SPARK_EXECUTOR_MEMORY}"
      -Xmx"${SPARK_EXECUTOR_MEMORY}"
      -cp "$SPARK_CLASSPATH"
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
      --driver-url "$SPARK_DRIVER_URL"
      --executor-id "$SPARK_EXECUTOR_ID"
      --cores "$SPARK_EXECUTOR_CORES"
      --app-id "$SPARK_APPLICATION_ID"
      --hostname "$SPARK_EXECUTOR_POD_IP"
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}"
      --podName "$SPARK_EXECUTOR_POD_NAME"
    )
    ;;
  *)
    CMD=("$@")
    ;;
esac

exec /usr/bin/tini -s -- "${CMD[@]}"
