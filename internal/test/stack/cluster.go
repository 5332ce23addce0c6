package stack

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Issuer is the ServiceAccount token issuer of the test cluster.
const Issuer = "https://kubernetes.default.svc.cluster.local"

// auditPolicy records every TokenReview (metadata only: never a token), so the
// suite can count the reviews a check caused.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: authentication.k8s.io
    resources: ["tokenreviews"]
- level: None
`

// Cluster is a running etcd + kube-apiserver pair.
type Cluster struct {
	Dir             string // certs, data, kubeconfigs
	URL             string // https://127.0.0.1:<port>
	CA              *CA    // signs the serving and client certificates
	AdminKubeconfig string
	AuditLog        string
	Config          *rest.Config
	Client          kubernetes.Interface
	Dynamic         dynamic.Interface
	SAKey           *rsa.PrivateKey // the token signing key: the suite can sign tokens itself

	procs         *Procs
	bins          KubeBinaries
	apiserverArgs []string // all but --secure-port
	port          int
	APIServer     *Proc
	Etcd          *Proc
}

// StartCluster starts etcd and kube-apiserver with ServiceAccount tokens,
// RBAC and audit logging of TokenReviews, and waits until /readyz is 200.
func StartCluster(ctx context.Context, procs *Procs, bins KubeBinaries, dir string) (*Cluster, error) {
	c := &Cluster{Dir: dir, procs: procs, bins: bins}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster dir: %w", err)
	}
	etcdURL, err := c.startEtcd(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.writeAPIServerArgs(etcdURL); err != nil {
		return nil, err
	}
	if err := c.StartAPIServer(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// startEtcd starts etcd on fresh ports and waits until its client port
// accepts connections, retrying when a port was taken meanwhile.
func (c *Cluster) startEtcd(ctx context.Context) (string, error) {
	var clientURL string
	err := retryPorts(ctx, c.procs.Out, "etcd", func() error { return nil }, func(ctx context.Context) error {
		var client, peer string
		if err := repickAddrs(&client, &peer); err != nil {
			return err
		}
		clientURL = "http://" + client
		peerURL := "http://" + peer
		// A failed attempt may have left a member bound to its peer URL.
		dataDir := filepath.Join(c.Dir, "etcd")
		if err := os.RemoveAll(dataDir); err != nil {
			return fmt.Errorf("etcd data dir: %w", err)
		}
		p, err := c.procs.Start("etcd", c.bins.Etcd,
			"--name=e2e", "--data-dir="+dataDir,
			"--listen-client-urls="+clientURL, "--advertise-client-urls="+clientURL,
			"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
			"--initial-cluster=e2e="+peerURL, "--unsafe-no-fsync", "--log-level=warn")
		if err != nil {
			return err
		}
		c.Etcd = p
		return addrInUse(p, WaitFor(ctx, p, startTimeout, listensOn(p, client)))
	})
	return clientURL, err
}

func (c *Cluster) writeAPIServerArgs(etcdURL string) error {
	ca, err := NewCA("wirekube-e2e-kube-ca")
	if err != nil {
		return err
	}
	c.CA = ca
	caPath := filepath.Join(c.Dir, "ca.crt")
	if err := os.WriteFile(caPath, ca.CertPEM, 0o644); err != nil {
		return fmt.Errorf("write ca: %w", err)
	}
	serving, err := ca.ServerCert("kube-apiserver", "kubernetes.default.svc")
	if err != nil {
		return err
	}
	certPath, keyPath, err := serving.WriteFiles(c.Dir, "apiserver")
	if err != nil {
		return err
	}
	saKey, saPriv, saPub, err := writeSAKeys(c.Dir)
	if err != nil {
		return err
	}
	c.SAKey = saKey
	policy := filepath.Join(c.Dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return fmt.Errorf("audit policy: %w", err)
	}
	c.AuditLog = filepath.Join(c.procs.LogDir, "kube-apiserver-audit.log")
	c.apiserverArgs = []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--tls-cert-file=" + certPath, "--tls-private-key-file=" + keyPath, "--client-ca-file=" + caPath,
		"--service-account-issuer=" + Issuer, "--api-audiences=" + Issuer,
		"--service-account-key-file=" + saPub, "--service-account-signing-key-file=" + saPriv,
		"--authorization-mode=RBAC", "--service-cluster-ip-range=10.96.0.0/16",
		"--cert-dir=" + filepath.Join(c.Dir, "certs"),
		"--audit-policy-file=" + policy, "--audit-log-path=" + c.AuditLog, "--audit-log-mode=blocking",
		"--audit-log-maxbackup=0", "--v=1",
		// No kubernetes Service endpoints on loopback (the reconciler refuses 127.0.0.1).
		"--endpoint-reconciler-type=none",
	}
	return c.setAPIServerPort()
}

// setAPIServerPort picks a fresh port for kube-apiserver and points URL, the
// admin kubeconfig and the clients at it. Only a first start calls it:
// later, extauthz's kubeconfig holds the URL.
func (c *Cluster) setAPIServerPort() error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	c.port = port
	c.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	return c.writeAdminKubeconfig(c.CA)
}

func (c *Cluster) writeAdminKubeconfig(ca *CA) error {
	admin, err := ca.ClientCert("wirekube-e2e-admin", "system:masters")
	if err != nil {
		return err
	}
	c.AdminKubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: c.URL, CertificateAuthorityData: ca.CertPEM}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: admin.CertPEM, ClientKeyData: admin.KeyPEM}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "admin"}
	kc.CurrentContext = "e2e"
	if err := clientcmd.WriteToFile(*kc, c.AdminKubeconfig); err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig)
	if err != nil {
		return fmt.Errorf("admin kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	c.Config = cfg
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if c.Dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	return nil
}

// StartAPIServer (re)starts kube-apiserver and waits for /readyz. The fault
// scenarios stop and restart it. A first start whose port was taken
// meanwhile is retried on a fresh port (URL, AdminKubeconfig and the clients
// follow); a restart keeps the port, because extauthz's kubeconfig has it.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	var repick func() error
	if c.APIServer == nil {
		repick = c.setAPIServerPort
	}
	return retryPorts(ctx, c.procs.Out, "kube-apiserver", repick, c.startAPIServerOnce)
}

func (c *Cluster) startAPIServerOnce(ctx context.Context) error {
	args := append(append([]string(nil), c.apiserverArgs...), "--secure-port="+strconv.Itoa(c.port))
	p, err := c.procs.Start("kube-apiserver", c.bins.APIServer, args...)
	if err != nil {
		return err
	}
	c.APIServer = p
	start := time.Now()
	owned := listensOn(p, strings.TrimPrefix(c.URL, "https://"))
	err = WaitFor(ctx, p, apiserverStartTimeout, func(ctx context.Context) error {
		if err := owned(ctx); err != nil {
			return err // not listening yet, or the port is another process's
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("readyz: %w (%s)", err, body)
		}
		return nil
	})
	if err != nil {
		return addrInUse(p, fmt.Errorf("kube-apiserver not ready: %w", err))
	}
	fmt.Fprintf(c.procs.Out, "harness: kube-apiserver ready at %s after %s\n", c.URL, time.Since(start).Round(time.Millisecond))
	return nil
}

// apiserverStartTimeout is generous: kube-apiserver takes 10-30 s to become
// ready on a loaded 2-core machine (it installs every built-in API first).
const apiserverStartTimeout = 3 * time.Minute

// StopAPIServer stops kube-apiserver (etcd keeps running).
func (c *Cluster) StopAPIServer() error {
	if c.APIServer == nil {
		return errors.New("kube-apiserver not started")
	}
	return c.APIServer.Stop(15 * time.Second)
}
