package manifests

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/wirekube/relay-ws/internal/test/render"
)

// TestChartRendersAlikeTwice: every value set renders byte for byte the same
// twice under helm template (Argo CD and kustomize's helmCharts render this
// way, without lookup): nothing in a render is generated per render, so no
// render makes the application out of sync or swaps a key.
func TestChartRendersAlikeTwice(t *testing.T) {
	for name, extra := range chartValueSets {
		t.Run(name, func(t *testing.T) {
			first, err := render.HelmTemplate(t.Context(), chartDir, namespace, extra...)
			if err != nil {
				t.Fatal(err)
			}
			second, err := render.HelmTemplate(t.Context(), chartDir, namespace, extra...)
			if err != nil {
				t.Fatal(err)
			}
			mustf(t, bytes.Equal(first, second), "two renders differ")
		})
	}
}

// TestChartSharedKeyWithoutClusterRefuses: a shared signing key with no
// existingSecret, rendered without a cluster, fails naming the value to set
// and the command that makes the Secret, instead of a fresh key per render.
func TestChartSharedKeyWithoutClusterRefuses(t *testing.T) {
	for _, set := range []string{"front=none", "identitySigning.sharedKey=true", "front=none,ingress.enabled=true"} {
		t.Run(set, func(t *testing.T) {
			_, err := render.HelmTemplate(t.Context(), chartDir, namespace, "--set", set)
			for _, want := range []string{"identitySigning.existingSecret",
				"kubectl -n wirekube-system create secret generic wirekube-relay-gateway-identity-signing-key"} {
				mustf(t, err != nil && strings.Contains(err.Error(), want), "got %v, want a refusal naming %q", err, want)
			}
		})
	}
}

// kubeletFiles returns the files kubelet writes into vol from the Secrets
// (name -> keys; a name absent from the map is a Secret that does not
// exist), or the error that keeps the Pod in ContainerCreating. The rule is
// kubelet's, kubernetes/kubernetes pkg/volume/secret/secret.go MakePayload
// (without items every key of the Secret becomes a file; with items "if a
// key is specified which is not present in the Secret, the volume setup will
// error unless it is marked optional", the API's SecretVolumeSource.items
// and SecretProjection.items), and pkg/volume/projected/projected.go
// collectData, which applies it to each secret source with that source's own
// optional and fails the volume when any source fails. A missing Secret
// fails the mount unless optional, which then projects nothing.
func kubeletFiles(vol corev1.Volume, secrets map[string][]string) ([]string, error) {
	type source struct {
		name     string
		items    []corev1.KeyToPath
		optional bool
	}
	var sources []source
	switch {
	case vol.Secret != nil:
		sources = append(sources, source{vol.Secret.SecretName, vol.Secret.Items, ptrTrue(vol.Secret.Optional)})
	case vol.Projected != nil:
		for _, p := range vol.Projected.Sources {
			if p.Secret == nil {
				return nil, fmt.Errorf("volume %s: a projected source other than a Secret", vol.Name)
			}
			sources = append(sources, source{p.Secret.Name, p.Secret.Items, ptrTrue(p.Secret.Optional)})
		}
	default:
		return nil, fmt.Errorf("volume %s is no Secret volume", vol.Name)
	}
	var files []string
	for _, s := range sources {
		keys, exists := secrets[s.name]
		if !exists && !s.optional {
			return nil, fmt.Errorf("secret %q not found", s.name)
		}
		if len(s.items) == 0 {
			files = append(files, keys...)
			continue
		}
		for _, it := range s.items {
			if !slices.Contains(keys, it.Key) {
				if s.optional {
					continue
				}
				return nil, fmt.Errorf("references non-existent secret key: %s", it.Key)
			}
			files = append(files, it.Path)
		}
	}
	slices.Sort(files)
	return files, nil
}

// TestChartExistingSigningSecretMounts: with identitySigning.existingSecret,
// kubelet mounts a Secret holding signing.pem alone (what the documented
// kubectl command and the kustomize recipe create) and one that adds
// accepted.pem, and refuses one without signing.pem; extauthz's key file
// flags name files of that mount.
func TestChartExistingSigningSecretMounts(t *testing.T) {
	const secret = "operator-signing"
	d := renderChart(t, "--set", "front=none,identitySigning.existingSecret="+secret).deployment(t)
	var vol *corev1.Volume
	for i := range d.Spec.Template.Spec.Volumes {
		if d.Spec.Template.Spec.Volumes[i].Name == "identity-signing" {
			vol = &d.Spec.Template.Spec.Volumes[i]
		}
	}
	mustf(t, vol != nil, "no identity-signing volume")
	for _, tc := range []struct {
		name string
		keys []string
		want []string // nil: the mount fails
	}{
		{"signing.pem alone", []string{"signing.pem"}, []string{"signing.pem"}},
		{"with accepted.pem", []string{"accepted.pem", "signing.pem"}, []string{"accepted.pem", "signing.pem"}},
		{"without signing.pem", []string{"accepted.pem"}, nil},
	} {
		files, err := kubeletFiles(*vol, map[string][]string{secret: tc.keys})
		switch {
		case tc.want == nil:
			mustf(t, err != nil, "%s: kubelet would mount %v, want a mount error", tc.name, files)
		default:
			mustf(t, err == nil && slices.Equal(files, tc.want), "%s: kubelet would mount %v (%v), want %v", tc.name, files, err, tc.want)
		}
	}
	_, err := kubeletFiles(*vol, map[string][]string{})
	mustf(t, err != nil, "kubelet would mount a missing Secret")

	ext := container(d, "extauthz")
	var dir string
	for _, m := range ext.VolumeMounts {
		if m.Name == "identity-signing" {
			dir = m.MountPath
		}
	}
	o := parseExtauthz(t, ext.Args)
	mustf(t, o.IdentitySigningKeyFile == path.Join(dir, "signing.pem"), "--identity-signing-key-file=%s, want signing.pem under %s", o.IdentitySigningKeyFile, dir)
	mustf(t, o.IdentityAcceptedKeysFile == path.Join(dir, "accepted.pem"), "--identity-accepted-keys-file=%s, want accepted.pem under %s", o.IdentityAcceptedKeysFile, dir)
}
