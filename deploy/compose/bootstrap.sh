#!/bin/sh
# One-shot bootstrap of the compose stack, run in the k3s image (it has sh and
# kubectl). Installs the WireKubePeer CRD, the gateway's ServiceAccount and
# RBAC from manifests/base, a demo peer with its dedicated ServiceAccount, and
# writes:
#   /extauthz/kubeconfig + /extauthz/token  extauthz's own identity (the
#                                           manifests' least-privilege RBAC)
#   /peer/token                             the demo peer's relay token
# Tokens are written to files only, never printed.
set -eu

NS=wirekube-system
PEER=compose-peer
ADMIN=/tmp/admin.kubeconfig

echo "bootstrap: waiting for the k3s kubeconfig"
i=0
until [ -s /k3s-output/kubeconfig.yaml ]; do
  i=$((i + 1)); [ "$i" -le 120 ] || { echo "bootstrap: no kubeconfig after 120s" >&2; exit 1; }
  sleep 1
done
# k3s writes https://127.0.0.1:6443; inside the compose network it is k3s:6443.
sed 's#https://127.0.0.1:6443#https://k3s:6443#' /k3s-output/kubeconfig.yaml > "$ADMIN"
export KUBECONFIG="$ADMIN"

echo "bootstrap: waiting for the API server"
i=0
until kubectl get --raw /readyz >/dev/null 2>&1; do
  i=$((i + 1)); [ "$i" -le 120 ] || { echo "bootstrap: API server not ready after 120s" >&2; exit 1; }
  sleep 1
done

kubectl apply -f /crds/wirekubepeers.yaml
kubectl wait --for=condition=Established --timeout=60s crd/wirekubepeers.wirekube.io
kubectl create namespace "$NS" --dry-run=client -o yaml | kubectl apply -f -
kubectl -n "$NS" apply -f /base/serviceaccount.yaml -f /base/rbac.yaml
kubectl apply -f /deploy/peer.yaml
kubectl -n "$NS" create serviceaccount "wirekube-relay-peer-$PEER" --dry-run=client -o yaml | kubectl apply -f -

echo "bootstrap: writing extauthz's kubeconfig (ServiceAccount wirekube-relay-gateway)"
umask 077
kubectl -n "$NS" create token wirekube-relay-gateway --duration=24h > /extauthz/token
CA=$(kubectl config view --raw -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
cat > /extauthz/kubeconfig <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: k3s
  cluster:
    server: https://k3s:6443
    certificate-authority-data: $CA
users:
- name: wirekube-relay-gateway
  user:
    tokenFile: /extauthz/token
contexts:
- name: wirekube-relay-gateway
  context: {cluster: k3s, user: wirekube-relay-gateway, namespace: $NS}
current-context: wirekube-relay-gateway
KUBECONFIG

echo "bootstrap: issuing the relay token of peer $PEER (audience wirekube-relay, 1h)"
kubectl -n "$NS" create token "wirekube-relay-peer-$PEER" --audience=wirekube-relay --duration=1h > /peer/token

# The gateway binaries run as uid 65532 (distroless nonroot).
chown 65532:65532 /extauthz/token /extauthz/kubeconfig /peer/token
echo "bootstrap: done"
