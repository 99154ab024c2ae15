#!/usr/bin/env bash
# Submit an example pipeline in cluster mode against a TinyStreamCluster.
#
#   spark-on-k8s/k8s/submit.sh --cluster demo [--namespace tinystream] [--pipeline tumbling]
#       [--image tinystream-spark:0.1.0] [--generate 2000] [--continuous] [--wait]
#       [--cpu-request 250m]   # driver and executor CPU requests (Spark asks 1 CPU each by default)
#
# What it does:
#   1. applies rbac.yaml and checkpoint-pvc.yaml in the namespace (idempotent);
#   2. finds the cluster's client Service (<cluster>-kafka) and its "kafka" port;
#   3. runs spark-submit --deploy-mode cluster with the image, the service
#      account, the pod templates (checkpoint claim at /checkpoints) and the
#      pipeline's arguments;
#   4. with --wait (implied unless --continuous), waits for the driver pod to
#      finish and prints the end of its log (the pipeline's result table).
#
# Needs kubectl with a current context, and spark-submit (from `pip install
# pyspark`, e.g. the project's .venv) on PATH or in $SPARK_SUBMIT.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CLUSTER=""
NAMESPACE="tinystream"
PIPELINE="tumbling"
IMAGE="tinystream-spark:0.1.0"
GENERATE=""
TRIGGER="available-now"
WAIT=1
EXECUTORS=1
CPU_REQUEST=""
SPARK_SUBMIT="${SPARK_SUBMIT:-$(command -v spark-submit || true)}"

usage() { sed -n '2,20p' "$0"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --cluster) CLUSTER="$2"; shift 2 ;;
    --namespace|-n) NAMESPACE="$2"; shift 2 ;;
    --pipeline) PIPELINE="$2"; shift 2 ;;
    --image) IMAGE="$2"; shift 2 ;;
    --generate) GENERATE="$2"; shift 2 ;;
    --executors) EXECUTORS="$2"; shift 2 ;;
    --cpu-request) CPU_REQUEST="$2"; shift 2 ;;
    --continuous) TRIGGER="continuous"; WAIT=0; shift ;;
    --wait) WAIT=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "unknown argument: $1" >&2; usage 2 ;;
  esac
done
[ -n "$CLUSTER" ] || { echo "--cluster is required (the TinyStreamCluster's name)" >&2; exit 2; }
[ -f "$HERE/../pipelines/$PIPELINE.py" ] || { echo "no pipeline named $PIPELINE in spark-on-k8s/pipelines" >&2; exit 2; }
[ -n "$SPARK_SUBMIT" ] || { echo "spark-submit not found: pip install 'pyspark>=4.2' or set SPARK_SUBMIT" >&2; exit 2; }

kubectl apply -n "$NAMESPACE" -f "$HERE/rbac.yaml" -f "$HERE/checkpoint-pvc.yaml" >/dev/null

SERVICE="$CLUSTER-kafka"
PORT="$(kubectl get service "$SERVICE" -n "$NAMESPACE" -o jsonpath='{.spec.ports[?(@.name=="kafka")].port}')"
[ -n "$PORT" ] || { echo "service $SERVICE in $NAMESPACE has no port named kafka" >&2; exit 1; }
BOOTSTRAP="$SERVICE.$NAMESPACE.svc:$PORT"

SERVER="$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}')"
APP="tinystream-$PIPELINE-$(date +%s)"
ARGS=(--bootstrap "$BOOTSTRAP" --trigger "$TRIGGER" --checkpoint "/checkpoints/$APP")
# On a small cluster (kind on a laptop) 1 CPU per pod may not fit: the driver and executors share the
# node of the checkpoint claim (ReadWriteOnce).
CONF=()
[ -n "$CPU_REQUEST" ] && CONF+=(--conf "spark.kubernetes.driver.request.cores=$CPU_REQUEST"
                              --conf "spark.kubernetes.executor.request.cores=$CPU_REQUEST")
[ -n "$GENERATE" ] && ARGS+=(--generate "$GENERATE")

echo "submitting $PIPELINE as $APP against $BOOTSTRAP (image $IMAGE)"
"$SPARK_SUBMIT" \
  --master "k8s://$SERVER" \
  --deploy-mode cluster \
  --name "$APP" \
  --conf spark.kubernetes.namespace="$NAMESPACE" \
  --conf spark.kubernetes.container.image="$IMAGE" \
  --conf spark.kubernetes.container.image.pullPolicy=IfNotPresent \
  --conf spark.kubernetes.authenticate.driver.serviceAccountName=spark \
  --conf spark.kubernetes.driver.podTemplateFile="$HERE/pod-templates/driver.yaml" \
  --conf spark.kubernetes.executor.podTemplateFile="$HERE/pod-templates/executor.yaml" \
  --conf spark.kubernetes.driver.label.tinystream.io/app="$APP" \
  --conf spark.kubernetes.submission.waitAppCompletion=false \
  --conf spark.executor.instances="$EXECUTORS" \
  --conf spark.executor.memory=1g \
  --conf spark.driver.memory=1g \
  --conf spark.sql.shuffle.partitions=4 \
  --conf spark.sql.session.timeZone=UTC \
  --conf spark.pyspark.python=/opt/venv/bin/python \
  "${CONF[@]}" \
  --py-files local:///opt/tinystream/pipelines/common.py \
  "local:///opt/tinystream/pipelines/$PIPELINE.py" "${ARGS[@]}"

[ "$WAIT" = 1 ] || { echo "submitted; driver pods: kubectl get pods -n $NAMESPACE -l tinystream.io/app=$APP"; exit 0; }

SELECTOR="tinystream.io/app=$APP,spark-role=driver"
for _ in $(seq 1 120); do
  PHASE="$(kubectl get pods -n "$NAMESPACE" -l "$SELECTOR" -o jsonpath='{.items[0].status.phase}' 2>/dev/null || true)"
  case "$PHASE" in Succeeded|Failed) break ;; esac
  sleep 5
done
kubectl logs -n "$NAMESPACE" -l "$SELECTOR" --tail=80 || true
[ "${PHASE:-}" = "Succeeded" ] || { echo "driver ended in phase ${PHASE:-unknown}" >&2; exit 1; }
