// Package chartdoc generates the chart's README.md from its Chart.yaml and
// values.yaml: every value with its default and the comment above it, so
// the page cannot drift from what the chart installs (a test in manifests/
// compares the committed README with Render's output).
package chartdoc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// Value is one leaf of values.yaml: a scalar, a list or an empty map.
type Value struct {
	Path    string // dotted, e.g. bridge.maxSessions
	Default string // JSON of the default
	Meaning string // the comment above the key (or its line comment)
	// Inherited is true when the value has no comment of its own and
	// Meaning is that of the nearest commented enclosing key.
	Inherited bool
}

// Values returns the leaves of a values.yaml in file order.
func Values(src []byte) ([]Value, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("values.yaml: %w", err)
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("values.yaml: not a mapping")
	}
	var out []Value
	err := walk(doc.Content[0], "", "", &out)
	return out, err
}

func walk(m *yaml.Node, prefix, inherited string, out *[]Value) error {
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i], m.Content[i+1]
		path := prefix + key.Value
		own := comment(key.HeadComment, key.LineComment, val.LineComment)
		meaning := own
		if meaning == "" {
			meaning = inherited
		}
		if val.Kind == yaml.MappingNode && len(val.Content) > 0 {
			if err := walk(val, path+".", meaning, out); err != nil {
				return err
			}
			continue
		}
		var v any
		if err := val.Decode(&v); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		def, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		*out = append(*out, Value{Path: path, Default: string(def), Meaning: meaning, Inherited: own == ""})
	}
	return nil
}

// comment joins comment blocks into one line of prose.
func comment(blocks ...string) string {
	var words []string
	for _, b := range blocks {
		for _, line := range strings.Split(b, "\n") {
			line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
			if line != "" {
				words = append(words, line)
			}
		}
	}
	return strings.Join(words, " ")
}

// Chart is what the README's head says about the chart.
type Chart struct {
	Name, Version, AppVersion, KubeVersion, Description string
}

// Render returns the README for chart and its values.
func Render(c Chart, vals []Value) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!-- Generated from Chart.yaml and values.yaml by `make chart-readme`; a test fails when it differs. -->\n")
	fmt.Fprintf(&b, "# %s %s\n\n%s\n\n", c.Name, c.Version, c.Description)
	fmt.Fprintf(&b, "Image version (appVersion): `%s`. Kubernetes: `%s`.\n\n", c.AppVersion, c.KubeVersion)
	b.WriteString(install)
	b.WriteString("## Values\n\n")
	b.WriteString("Every value, its default and what it does (the comment above it in `values.yaml`; a value without a comment\n")
	b.WriteString("of its own shows its block's, in italics). `values.schema.json` refuses unknown keys and wrong types.\n\n")
	b.WriteString("| value | default | meaning |\n|---|---|---|\n")
	for _, v := range vals {
		meaning := cell(v.Meaning)
		if v.Inherited && meaning != "" {
			meaning = "_" + meaning + "_"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", v.Path, cell(v.Default), meaning)
	}
	return b.String()
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

const install = "## Install\n\n" +
	"Next to the WireKube chart, in its namespace (docs/alongside-chart.md is the whole procedure, with the order the\n" +
	"mesh moves to wss in):\n\n" +
	"```sh\n" +
	"helm install wirekube-relay-gateway charts/wirekube-relay-ws -n wirekube-system --set publicHost=relay.example.com\n" +
	"```\n\n" +
	"A chart from a checkout between releases is a `-dev` version, of which no registry has an image: build your own\n" +
	"and deploy its digest (docs/deploy.md#own-image); a release is verified, then deployed, by digest\n" +
	"(docs/deploy.md#verify-a-release).\n\n" +
	"`helm status` prints the lock-down stage, the WireKubeMesh to apply and the probe commands (NOTES.txt);\n" +
	"`helm test` runs the probe on one node once `helmTest.peer` and `helmTest.publicKey` are set. Roll back with\n" +
	"`helm rollback wirekube-relay-gateway REVISION -n wirekube-system`.\n\n" +
	"Object names are fixed (`wirekube-relay-gateway*`, one gateway per cluster, like the WireKube chart's): the\n" +
	"probe's default selector, the alerts and the admission policy name them, so there is no `nameOverride`. There is\n" +
	"no HorizontalPodAutoscaler either: docs/deploy.md#autoscaling says why.\n\n"
