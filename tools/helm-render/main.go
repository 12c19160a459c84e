// SPDX-License-Identifier: Apache-2.0
// helm-render renders a Helm chart the way `helm template` does, for the
// subset of Helm that proflet's chart uses. Helm is not packaged in Debian;
// this program is built from Debian's Go packages only:
//
//	GOPATH=/usr/share/gocode GO111MODULE=off go build -o helm-render ./tools/helm-render
//
// What it implements (and so what helm/proflet may rely on):
//   - Chart.yaml -> .Chart (Name, Version, AppVersion, Description, Type, ...)
//   - values.yaml, deep-merged with each -f FILE and --set/--set-string
//     (a null value deletes a key, as in Helm); numbers become float64, as
//     Helm's YAML-through-JSON loading does
//   - .Release (Name, Namespace, Service, IsInstall, IsUpgrade, Revision;
//     --release-service sets Service for manifests not managed by Helm),
//     .Capabilities (KubeVersion.{Version,Major,Minor,GitVersion},
//     APIVersions.Has), .Template (Name, BasePath), .Files.Get
//   - every sprig function except env and expandenv (Helm removes them),
//     plus Helm's toYaml, fromYaml, toJson, fromJson, include, tpl,
//     required and lookup (always empty: there is no cluster)
//   - missingkey=zero, "<no value>" removed, files starting with "_" are
//     partials, NOTES.txt rendered only with --notes, empty documents
//     dropped, documents ordered by Helm's install order of kinds
//
// Anything else in a template is a parse or execution error here, so a
// chart that renders here uses nothing this program does not implement.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/ioutil"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	sprig "github.com/Masterminds/sprig"
	yaml "gopkg.in/yaml.v2"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// KubeVersion mirrors Helm's chartutil.KubeVersion.
type KubeVersion struct {
	Version    string
	Major      string
	Minor      string
	GitVersion string
}

func (k KubeVersion) String() string { return k.Version }

// VersionSet mirrors Helm's chartutil.VersionSet.
type VersionSet []string

// Has reports whether the API version (group/version or group/version/Kind) is known.
func (v VersionSet) Has(apiVersion string) bool {
	for _, x := range v {
		if x == apiVersion {
			return true
		}
	}
	return false
}

// Capabilities mirrors Helm's chartutil.Capabilities.
type Capabilities struct {
	KubeVersion KubeVersion
	APIVersions VersionSet
}

// Files mirrors the part of Helm's Files that the chart may use.
type Files map[string][]byte

// Get returns a chart file's content or "".
func (f Files) Get(name string) string { return string(f[name]) }

// GetBytes returns a chart file's content or nil.
func (f Files) GetBytes(name string) []byte { return f[name] }

// normalize turns yaml.v2's map[interface{}]interface{} into
// map[string]interface{} and ints into float64, which is what Helm's
// YAML -> JSON -> Go loading produces.
func normalize(v interface{}) interface{} {
	switch x := v.(type) {
	case map[interface{}]interface{}:
		m := make(map[string]interface{}, len(x))
		for k, val := range x {
			m[fmt.Sprint(k)] = normalize(val)
		}
		return m
	case map[string]interface{}:
		for k, val := range x {
			x[k] = normalize(val)
		}
		return x
	case []interface{}:
		for i := range x {
			x[i] = normalize(x[i])
		}
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case uint64:
		return float64(x)
	default:
		return v
	}
}

func readYAMLMap(data []byte) (map[string]interface{}, error) {
	var raw interface{}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return nil, err
	}
	if raw == nil {
		return map[string]interface{}{}, nil
	}
	m, ok := normalize(raw).(map[string]interface{})
	if !ok {
		return nil, errors.New("top level is not a map")
	}
	return m, nil
}

// mergeValues merges src into dst like Helm's coalescing of user values over
// chart defaults: maps merge recursively, anything else replaces, and a nil
// value deletes the key.
func mergeValues(dst, src map[string]interface{}) {
	for k, sv := range src {
		if sv == nil {
			delete(dst, k)
			continue
		}
		sm, sIsMap := sv.(map[string]interface{})
		dm, dIsMap := dst[k].(map[string]interface{})
		if sIsMap && dIsMap {
			mergeValues(dm, sm)
			continue
		}
		dst[k] = sv
	}
}

// parseSetValue converts a --set value the way Helm's strvals does for the
// plain cases: true/false, null, integers; anything else is a string.
func parseSetValue(s string, forceString bool) interface{} {
	if forceString {
		return s
	}
	switch s {
	case "true":
		return true
	case "false":
		return false
	case "null":
		return nil
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil && (s == "0" || !strings.HasPrefix(s, "0")) {
		return float64(i)
	}
	return s
}

// applySet handles `a.b.c=value` and `a.b[0]=value`-free lists `{x,y}`.
func applySet(vals map[string]interface{}, expr string, forceString bool) error {
	eq := strings.Index(expr, "=")
	if eq <= 0 {
		return fmt.Errorf("--set %q: want key=value", expr)
	}
	key, raw := expr[:eq], expr[eq+1:]
	var v interface{}
	if strings.HasPrefix(raw, "{") && strings.HasSuffix(raw, "}") {
		var list []interface{}
		inner := raw[1 : len(raw)-1]
		if inner != "" {
			for _, p := range strings.Split(inner, ",") {
				list = append(list, parseSetValue(p, forceString))
			}
		}
		if list == nil {
			list = []interface{}{}
		}
		v = list
	} else {
		v = parseSetValue(raw, forceString)
	}
	parts := strings.Split(key, ".")
	cur := vals
	for _, p := range parts[:len(parts)-1] {
		next, ok := cur[p].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			cur[p] = next
		}
		cur = next
	}
	last := parts[len(parts)-1]
	if v == nil {
		delete(cur, last)
	} else {
		cur[last] = v
	}
	return nil
}

// toYAML is Helm's toYaml: JSON first (so keys sort and types are JSON's),
// then YAML, trailing newline trimmed.
func toYAML(v interface{}) string {
	j, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	var ms yaml.MapSlice
	var anyv interface{}
	if err := yaml.Unmarshal(j, &ms); err == nil && len(j) > 0 && j[0] == '{' {
		anyv = ms
	} else if err := yaml.Unmarshal(j, &anyv); err != nil {
		return ""
	}
	out, err := yaml.Marshal(anyv)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(out), "\n")
}

func fromYAML(s string) map[string]interface{} {
	m, err := readYAMLMap([]byte(s))
	if err != nil {
		return map[string]interface{}{"Error": err.Error()}
	}
	return m
}

func toJSON(v interface{}) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

func fromJSON(s string) map[string]interface{} {
	m := map[string]interface{}{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

type renderer struct {
	tmpl     *template.Template
	chartDir string
}

func (r *renderer) funcs() template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	f["toYaml"] = toYAML
	f["fromYaml"] = fromYAML
	f["toJson"] = toJSON
	f["fromJson"] = fromJSON
	f["required"] = func(msg string, v interface{}) (interface{}, error) {
		if v == nil {
			return v, errors.New(msg)
		}
		if s, ok := v.(string); ok && s == "" {
			return v, errors.New(msg)
		}
		return v, nil
	}
	f["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	// include and tpl are bound late: they need the parsed template set.
	f["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		if err := r.tmpl.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return buf.String(), nil
	}
	f["tpl"] = func(text string, data interface{}) (string, error) {
		t, err := r.tmpl.Clone()
		if err != nil {
			return "", err
		}
		t, err = t.New("tpl").Parse(text)
		if err != nil {
			return "", fmt.Errorf("tpl: %w", err)
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", fmt.Errorf("tpl: %w", err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	return f
}

// installOrder is Helm's releaseutil.InstallOrder.
var installOrder = []string{
	"PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
	"PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
	"ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
	"CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
	"ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
	"DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
	"HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
	"APIService",
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

type doc struct {
	source string
	kind   string
	name   string
	body   string
	seq    int
}

func kindRank(kind string) int {
	for i, k := range installOrder {
		if k == kind {
			return i
		}
	}
	return len(installOrder)
}

func main() {
	var valueFiles, sets, setStrings, apiVersions multiFlag
	name := flag.String("name", "proflet", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	kubeVersion := flag.String("kube-version", "v1.30.0", "Kubernetes version for .Capabilities")
	notes := flag.Bool("notes", false, "print the rendered NOTES.txt instead of the manifests")
	service := flag.String("release-service", "Helm", ".Release.Service (plain manifests are generated with kubectl)")
	flag.Var(&valueFiles, "f", "values file (repeatable)")
	flag.Var(&valueFiles, "values", "values file (repeatable)")
	flag.Var(&sets, "set", "key=value (repeatable)")
	flag.Var(&setStrings, "set-string", "key=value, value kept a string (repeatable)")
	flag.Var(&apiVersions, "api-versions", "extra API version for .Capabilities.APIVersions (repeatable)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: helm-render [flags] CHART_DIR\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(flag.Arg(0), *name, *namespace, *service, *kubeVersion, *notes, valueFiles, sets, setStrings, apiVersions); err != nil {
		fmt.Fprintf(os.Stderr, "helm-render: %v\n", err)
		os.Exit(1)
	}
}

func run(chartDir, name, namespace, service, kubeVersion string, notes bool, valueFiles, sets, setStrings, apiVersions []string) error {
	chartRaw, err := ioutil.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		return err
	}
	meta, err := readYAMLMap(chartRaw)
	if err != nil {
		return fmt.Errorf("Chart.yaml: %w", err)
	}
	chart := map[string]interface{}{}
	for k, v := range meta {
		// Helm's chart.Metadata exposes fields in Go case: name -> Name.
		chart[strings.ToUpper(k[:1])+k[1:]] = v
	}
	chartName, _ := chart["Name"].(string)
	if chartName == "" {
		return errors.New("Chart.yaml: name is required")
	}

	vals := map[string]interface{}{}
	if raw, err := ioutil.ReadFile(filepath.Join(chartDir, "values.yaml")); err == nil {
		if vals, err = readYAMLMap(raw); err != nil {
			return fmt.Errorf("values.yaml: %w", err)
		}
	}
	for _, f := range valueFiles {
		raw, err := ioutil.ReadFile(f)
		if err != nil {
			return err
		}
		m, err := readYAMLMap(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		mergeValues(vals, m)
	}
	for _, s := range sets {
		if err := applySet(vals, s, false); err != nil {
			return err
		}
	}
	for _, s := range setStrings {
		if err := applySet(vals, s, true); err != nil {
			return err
		}
	}

	kv := strings.TrimPrefix(kubeVersion, "v")
	parts := strings.SplitN(kv, ".", 3)
	if len(parts) < 2 {
		return fmt.Errorf("--kube-version %q: want vMAJOR.MINOR.PATCH", kubeVersion)
	}
	caps := &Capabilities{
		KubeVersion: KubeVersion{Version: "v" + kv, Major: parts[0], Minor: parts[1], GitVersion: "v" + kv},
		APIVersions: append(VersionSet{"v1", "apps/v1", "policy/v1", "rbac.authorization.k8s.io/v1",
			"networking.k8s.io/v1"}, apiVersions...),
	}

	files := Files{}
	var tplNames []string
	r := &renderer{chartDir: chartDir}
	r.tmpl = template.New("gotpl").Option("missingkey=zero").Funcs(r.funcs())
	err = filepath.Walk(chartDir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(chartDir, p)
		rel = filepath.ToSlash(rel)
		data, err := ioutil.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.HasPrefix(rel, "templates/") {
			full := chartName + "/" + rel
			if _, err := r.tmpl.New(full).Parse(string(data)); err != nil {
				return err
			}
			tplNames = append(tplNames, full)
		} else {
			files[rel] = data
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(tplNames)

	release := map[string]interface{}{
		"Name": name, "Namespace": namespace, "Service": service,
		"IsInstall": true, "IsUpgrade": false, "Revision": 1,
	}
	var docs []doc
	seq := 0
	for _, tn := range tplNames {
		base := path.Base(tn)
		isNotes := base == "NOTES.txt"
		if strings.HasPrefix(base, "_") || isNotes != notes {
			continue
		}
		top := map[string]interface{}{
			"Values": vals, "Release": release, "Chart": chart, "Capabilities": caps,
			"Files":    files,
			"Template": map[string]interface{}{"Name": tn, "BasePath": chartName + "/templates"},
		}
		var buf bytes.Buffer
		if err := r.tmpl.ExecuteTemplate(&buf, tn, top); err != nil {
			return err
		}
		out := strings.ReplaceAll(buf.String(), "<no value>", "")
		if notes {
			fmt.Print(out)
			continue
		}
		for _, body := range docSep.Split(out, -1) {
			if strings.TrimSpace(body) == "" {
				continue
			}
			var head struct {
				Kind     string `yaml:"kind"`
				Metadata struct {
					Name string `yaml:"name"`
				} `yaml:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(body), &head); err != nil {
				return fmt.Errorf("%s: rendered YAML does not parse: %v\n%s", tn, err, body)
			}
			docs = append(docs, doc{source: tn, kind: head.Kind, name: head.Metadata.Name,
				body: strings.Trim(body, "\n"), seq: seq})
			seq++
		}
	}
	if notes {
		return nil
	}
	sort.SliceStable(docs, func(i, j int) bool {
		ri, rj := kindRank(docs[i].kind), kindRank(docs[j].kind)
		if ri != rj {
			return ri < rj
		}
		if ri == len(installOrder) && docs[i].kind != docs[j].kind {
			return docs[i].kind < docs[j].kind
		}
		return docs[i].seq < docs[j].seq
	})
	for _, d := range docs {
		fmt.Printf("---\n# Source: %s\n%s\n", d.source, d.body)
	}
	return nil
}
