// Package k8s_test checks the hand-written manifests in this directory offline:
// every manifest listed in kustomization.yaml is decoded strictly into the
// k8s.io/api type of its kind (unknown, misspelt or duplicate fields fail), and
// then the cross-references that no schema sees are checked: selectors against
// pod labels, Service ports against container ports, mounts against volumes,
// ConfigMap/Secret references, and nats.conf (parsed by nats-server itself)
// against the NATS StatefulSet. TestCheckersCatch shows that every check fails
// on a broken manifest.
package k8s_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsauth "github.com/sessionlog/sessionlog/deploy/nats"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const (
	kustomizationFile = "kustomization.yaml"
	secretExampleFile = "secret.example.yaml"

	natsName         = "nats"        // the NATS StatefulSet
	natsReplicas     = 3             // R3
	natsConfigMap    = "nats-config" // configMapGenerator holding nats.conf and auth.conf
	natsConfFile     = "nats.conf"
	natsDataVolume   = "data" // volumeClaimTemplate holding the JetStream store
	sessionlogImage  = "sessionlog"
	serviceNATSUser  = "service"
	eraserNATSUser   = "eraser" // the eraser's (and the repairer's) user: the service rights plus erasure
	httpPortName     = "http"
	componentLabel   = "app.kubernetes.io/component"
	natsURLFlag      = "--nats-url"
	httpListenFlag   = "--http-listen"
	dataDirFlag      = "--data-dir"
	natsUserEnv      = "SESSIONLOG_NATS_USER"
	natsPasswordEnv  = "SESSIONLOG_NATS_PASSWORD"
	sessionlogPrefix = "SESSIONLOG_"
)

// memoryLimitDefaults are the --memory-limit defaults of the commands
// that set the Go heap's soft limit (cmd/sessionlog).
var memoryLimitDefaults = map[string]int64{"writer": 256 << 20, "source": 256 << 20, "repairer": 256 << 20, "projector": 320 << 20}

// The six services: the kind and replica count each must run with.
var components = map[string]struct {
	kind        string
	minReplicas int32
	maxReplicas int32
	dataDir     bool // needs --data-dir on a volume claim
}{
	"writer":    {kind: "Deployment", minReplicas: 2, maxReplicas: 2},
	"projector": {kind: "StatefulSet", minReplicas: 1, maxReplicas: 1, dataDir: true},
	"repairer":  {kind: "Deployment", minReplicas: 2, maxReplicas: 2},
	"forker":    {kind: "Deployment", minReplicas: 1, maxReplicas: 100},
	"source":    {kind: "Deployment", minReplicas: 1, maxReplicas: 100},
	"eraser":    {kind: "Deployment", minReplicas: 1, maxReplicas: 100},
}

// ---------------------------------------------------------------------------
// Decoding

type kustomization struct {
	APIVersion         string      `json:"apiVersion"`
	Kind               string      `json:"kind"`
	Namespace          string      `json:"namespace"`
	Resources          []string    `json:"resources"`
	ConfigMapGenerator []generator `json:"configMapGenerator"`
	SecretGenerator    []generator `json:"secretGenerator"`
}

type generator struct {
	Name     string   `json:"name"`
	Files    []string `json:"files"`
	Literals []string `json:"literals"`
}

// keys returns the data keys the generator produces and, for files, the file
// each key is read from.
func (g generator) keys() (keys []string, files map[string]string) {
	files = map[string]string{}
	for _, f := range g.Files {
		key, path := filepath.Base(f), f
		if k, p, ok := strings.Cut(f, "="); ok {
			key, path = k, p
		}
		keys = append(keys, key)
		files[key] = path
	}
	for _, l := range g.Literals {
		k, _, _ := strings.Cut(l, "=")
		keys = append(keys, k)
	}
	return keys, files
}

var newObject = map[string]func() any{
	"v1/Namespace":                       func() any { return new(corev1.Namespace) },
	"v1/Service":                         func() any { return new(corev1.Service) },
	"v1/ConfigMap":                       func() any { return new(corev1.ConfigMap) },
	"v1/Secret":                          func() any { return new(corev1.Secret) },
	"apps/v1/Deployment":                 func() any { return new(appsv1.Deployment) },
	"apps/v1/StatefulSet":                func() any { return new(appsv1.StatefulSet) },
	"policy/v1/PodDisruptionBudget":      func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1/NetworkPolicy": func() any { return new(networkingv1.NetworkPolicy) },
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*(?:#.*)?$`)

// strictJSON decodes j into v refusing unknown fields, and then again with the
// API server's own rules: encoding/json matches keys case-insensitively and
// silently keeps the last of duplicate keys, which the API server refuses.
func strictJSON(j []byte, v any, fresh func() any) error {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the object")
	}
	strictErrs, err := kjson.UnmarshalStrict(j, fresh())
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// decodeManifests splits a multi-document YAML file on "---" and decodes each
// document strictly into the typed object of its apiVersion and kind.
func decodeManifests(data []byte) ([]any, error) {
	var out []any
	for i, doc := range docSeparator.Split(string(data), -1) {
		// The strict form refuses duplicate keys, which YAMLToJSON would
		// silently collapse to the last one.
		j, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if t := bytes.TrimSpace(j); len(t) == 0 || string(t) == "null" {
			continue // empty, or only comments
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(j, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		mk, ok := newObject[tm.APIVersion+"/"+tm.Kind]
		if !ok {
			return nil, fmt.Errorf("document %d: unsupported apiVersion/kind %q %q", i+1, tm.APIVersion, tm.Kind)
		}
		obj := mk()
		if err := strictJSON(j, obj, mk); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i+1, tm.Kind, err)
		}
		if meta := objectMeta(obj); meta.Name == "" {
			return nil, fmt.Errorf("document %d (%s): no metadata.name", i+1, tm.Kind)
		}
		out = append(out, obj)
	}
	return out, nil
}

func objectMeta(obj any) *metav1.ObjectMeta {
	switch o := obj.(type) {
	case *corev1.Namespace:
		return &o.ObjectMeta
	case *corev1.Service:
		return &o.ObjectMeta
	case *corev1.ConfigMap:
		return &o.ObjectMeta
	case *corev1.Secret:
		return &o.ObjectMeta
	case *appsv1.Deployment:
		return &o.ObjectMeta
	case *appsv1.StatefulSet:
		return &o.ObjectMeta
	case *policyv1.PodDisruptionBudget:
		return &o.ObjectMeta
	case *networkingv1.NetworkPolicy:
		return &o.ObjectMeta
	}
	panic(fmt.Sprintf("unhandled type %T", obj))
}

// ---------------------------------------------------------------------------
// The bundle: everything kustomize would apply, plus the example Secrets the
// manifests expect to exist and nats.conf as nats-server reads it.

type bundle struct {
	kust           kustomization
	namespaces     []*corev1.Namespace
	services       []*corev1.Service
	statefulSets   []*appsv1.StatefulSet
	deployments    []*appsv1.Deployment
	configMaps     []*corev1.ConfigMap
	secrets        []*corev1.Secret
	pdbs           []*policyv1.PodDisruptionBudget
	netpols        []*networkingv1.NetworkPolicy
	exampleSecrets []*corev1.Secret
	nats           natsConf
}

type natsConf struct {
	opts *server.Options
	// vars holds every $VARIABLE the config files reference, with the value
	// the test set it to before parsing.
	vars map[string]string
	// serverNameFollowsPod: server_name changed with $POD_NAME between two parses.
	serverNameFollowsPod bool
	// includes: the files nats.conf includes, relative to its directory.
	includes []string
}

func (b *bundle) add(obj any) {
	switch o := obj.(type) {
	case *corev1.Namespace:
		b.namespaces = append(b.namespaces, o)
	case *corev1.Service:
		b.services = append(b.services, o)
	case *corev1.ConfigMap:
		b.configMaps = append(b.configMaps, o)
	case *corev1.Secret:
		b.secrets = append(b.secrets, o)
	case *appsv1.Deployment:
		b.deployments = append(b.deployments, o)
	case *appsv1.StatefulSet:
		b.statefulSets = append(b.statefulSets, o)
	case *policyv1.PodDisruptionBudget:
		b.pdbs = append(b.pdbs, o)
	case *networkingv1.NetworkPolicy:
		b.netpols = append(b.netpols, o)
	}
}

func readKustomization(t *testing.T) kustomization {
	t.Helper()
	data, err := os.ReadFile(kustomizationFile)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		t.Fatalf("%s: %v", kustomizationFile, err)
	}
	var k kustomization
	if err := strictJSON(j, &k, func() any { return new(kustomization) }); err != nil {
		t.Fatalf("%s: %v (a field this test does not know: teach it, so its checks stay complete)", kustomizationFile, err)
	}
	return k
}

func loadBundle(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{kust: readKustomization(t)}
	for _, r := range b.kust.Resources {
		data, err := os.ReadFile(r)
		if err != nil {
			t.Fatalf("resource %s: %v", r, err)
		}
		objs, err := decodeManifests(data)
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		if len(objs) == 0 {
			t.Fatalf("%s: no objects", r)
		}
		for _, o := range objs {
			b.add(o)
		}
	}
	data, err := os.ReadFile(secretExampleFile)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeManifests(data)
	if err != nil {
		t.Fatalf("%s: %v", secretExampleFile, err)
	}
	for _, o := range objs {
		s, ok := o.(*corev1.Secret)
		if !ok {
			t.Fatalf("%s: holds a %T, want only Secrets", secretExampleFile, o)
		}
		b.exampleSecrets = append(b.exampleSecrets, s)
	}
	b.nats = loadNATSConf(t, b.kust)
	return b
}

// configVars finds the $VARIABLE references of a nats-server config file:
// unquoted $NAME tokens outside comments (quoted strings such as "$JS.API.>"
// are literal subjects, not variables).
var (
	quotedString = regexp.MustCompile(`"[^"\n]*"|'[^'\n]*'`)
	lineComment  = regexp.MustCompile(`(?m)(#|//).*$`)
	variableRef  = regexp.MustCompile(`\$([A-Za-z_][A-Za-z0-9_]*)`)
	includeRef   = regexp.MustCompile(`(?m)^\s*include\s+("[^"]+"|'[^']+'|\S+)`)
)

func configVars(text string) []string {
	text = quotedString.ReplaceAllString(text, `""`)
	text = lineComment.ReplaceAllString(text, "")
	var vars []string
	for _, m := range variableRef.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(vars, m[1]) {
			vars = append(vars, m[1])
		}
	}
	return vars
}

// loadNATSConf parses nats.conf (and what it includes) with nats-server's own
// parser, the way the pod does: the config refers to $POD_NAME and to password
// variables, which the test sets first.
func loadNATSConf(t *testing.T, k kustomization) natsConf {
	t.Helper()
	var gen *generator
	for i := range k.ConfigMapGenerator {
		if k.ConfigMapGenerator[i].Name == natsConfigMap {
			gen = &k.ConfigMapGenerator[i]
		}
	}
	if gen == nil {
		t.Fatalf("%s: no configMapGenerator %q", kustomizationFile, natsConfigMap)
	}
	_, files := gen.keys()
	confPath, ok := files[natsConfFile]
	if !ok {
		t.Fatalf("configMapGenerator %q has no %s", natsConfigMap, natsConfFile)
	}
	nc := natsConf{vars: map[string]string{}}
	confText, err := os.ReadFile(confPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range includeRef.FindAllStringSubmatch(lineComment.ReplaceAllString(string(confText), ""), -1) {
		nc.includes = append(nc.includes, strings.Trim(m[1], `"'`))
	}
	for _, path := range files {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range configVars(string(text)) {
			// A value of letters only: the parser re-reads it as a token.
			nc.vars[v] = "pw" + strings.ToLower(strings.ReplaceAll(v, "_", ""))
		}
	}
	for v, val := range nc.vars {
		t.Setenv(v, val)
	}
	// Parse twice with different pod names: server_name must follow the pod.
	t.Setenv("POD_NAME", natsName+"-2")
	opts2, err := server.ProcessConfigFile(confPath)
	if err != nil {
		t.Fatalf("nats-server rejects %s: %v", confPath, err)
	}
	t.Setenv("POD_NAME", natsName+"-0")
	nc.vars["POD_NAME"] = natsName + "-0"
	nc.opts, err = server.ProcessConfigFile(confPath)
	if err != nil {
		t.Fatalf("nats-server rejects %s: %v", confPath, err)
	}
	nc.serverNameFollowsPod = nc.opts.ServerName == natsName+"-0" && opts2.ServerName == natsName+"-2"
	return nc
}

// ---------------------------------------------------------------------------
// Helpers over the bundle

type workload struct {
	kind, name  string
	replicas    *int32
	selector    *metav1.LabelSelector
	template    *corev1.PodTemplateSpec
	claims      []corev1.PersistentVolumeClaim
	serviceName string
}

func (w workload) String() string { return w.kind + "/" + w.name }

func (b *bundle) workloads() []workload {
	var ws []workload
	for _, d := range b.deployments {
		ws = append(ws, workload{kind: "Deployment", name: d.Name, replicas: d.Spec.Replicas,
			selector: d.Spec.Selector, template: &d.Spec.Template})
	}
	for _, s := range b.statefulSets {
		ws = append(ws, workload{kind: "StatefulSet", name: s.Name, replicas: s.Spec.Replicas,
			selector: s.Spec.Selector, template: &s.Spec.Template,
			claims: s.Spec.VolumeClaimTemplates, serviceName: s.Spec.ServiceName})
	}
	return ws
}

func (b *bundle) natsStatefulSet() *appsv1.StatefulSet {
	for _, s := range b.statefulSets {
		if s.Name == natsName {
			return s
		}
	}
	return nil
}

func (b *bundle) service(name string) *corev1.Service {
	for _, s := range b.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// selects reports whether a label selector selects pods with these labels; an
// empty or invalid selector selects nothing here (none of ours should be).
func selects(sel *metav1.LabelSelector, podLabels map[string]string) bool {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(podLabels))
}

func (b *bundle) selected(sel *metav1.LabelSelector) []workload {
	var ws []workload
	for _, w := range b.workloads() {
		if selects(sel, w.template.Labels) {
			ws = append(ws, w)
		}
	}
	return ws
}

func allContainers(p *corev1.PodSpec) []corev1.Container {
	return append(slices.Clone(p.InitContainers), p.Containers...)
}

// hasPort reports whether a container declares port p (by name or number).
func hasPort(c corev1.Container, p intstr.IntOrString) bool {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return true
		}
	}
	return false
}

func podHasPort(p *corev1.PodSpec, port intstr.IntOrString) bool {
	return slices.ContainsFunc(p.Containers, func(c corev1.Container) bool { return hasPort(c, port) })
}

func containerPort(c corev1.Container, name string) int32 {
	for _, cp := range c.Ports {
		if cp.Name == name {
			return cp.ContainerPort
		}
	}
	return 0
}

func mountPath(c corev1.Container, volume string) string {
	for _, m := range c.VolumeMounts {
		if m.Name == volume {
			return m.MountPath
		}
	}
	return ""
}

func envVar(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

// configMapKeys and secretKeys: name -> data keys of everything that will exist.
func (b *bundle) configMapKeys() map[string][]string {
	m := map[string][]string{}
	for _, cm := range b.configMaps {
		for k := range cm.Data {
			m[cm.Name] = append(m[cm.Name], k)
		}
		for k := range cm.BinaryData {
			m[cm.Name] = append(m[cm.Name], k)
		}
		if m[cm.Name] == nil {
			m[cm.Name] = []string{}
		}
	}
	for _, g := range b.kust.ConfigMapGenerator {
		keys, _ := g.keys()
		m[g.Name] = append(m[g.Name], keys...)
	}
	return m
}

func (b *bundle) secretKeys() map[string][]string {
	m := map[string][]string{}
	for _, s := range append(slices.Clone(b.secrets), b.exampleSecrets...) {
		m[s.Name] = []string{}
		for k := range s.Data {
			m[s.Name] = append(m[s.Name], k)
		}
		for k := range s.StringData {
			m[s.Name] = append(m[s.Name], k)
		}
	}
	for _, g := range b.kust.SecretGenerator {
		keys, _ := g.keys()
		m[g.Name] = append(m[g.Name], keys...)
	}
	return m
}

// secretValue resolves a secretKeyRef against the example Secrets.
func (b *bundle) secretValue(ref *corev1.SecretKeySelector) (string, bool) {
	for _, s := range append(slices.Clone(b.secrets), b.exampleSecrets...) {
		if s.Name != ref.Name {
			continue
		}
		if v, ok := s.StringData[ref.Key]; ok {
			return v, true
		}
		if v, ok := s.Data[ref.Key]; ok {
			return string(v), true
		}
	}
	return "", false
}

// ---------------------------------------------------------------------------
// Checks. Each returns the problems it finds; TestManifests wants none, and
// TestCheckersCatch breaks the manifests to see each one fire.

type check struct {
	name string
	fn   func(b *bundle) []string
}

var checks = []check{
	{"kustomization", checkKustomization},
	{"namespace", checkNamespace},
	{"workload selectors", checkWorkloadSelectors},
	{"services", checkServices},
	{"statefulset services", checkStatefulSetServices},
	{"volumes", checkVolumes},
	{"images", checkImages},
	{"resources", checkResources},
	{"probes", checkProbes},
	{"references", checkReferences},
	{"security", checkSecurity},
	{"scheduling", checkScheduling},
	{"disruption budgets", checkPDBs},
	{"network policies", checkNetworkPolicies},
	{"nats", checkNATS},
	{"sessionlog services", checkSessionlogServices},
}

func runChecks(b *bundle) []string {
	var problems []string
	for _, c := range checks {
		for _, p := range c.fn(b) {
			problems = append(problems, c.name+": "+p)
		}
	}
	return problems
}

func checkKustomization(b *bundle) (p []string) {
	if b.kust.APIVersion != "kustomize.config.k8s.io/v1beta1" || b.kust.Kind != "Kustomization" {
		p = append(p, fmt.Sprintf("apiVersion/kind %q %q", b.kust.APIVersion, b.kust.Kind))
	}
	if len(b.kust.Resources) == 0 {
		p = append(p, "no resources")
	}
	for _, r := range b.kust.Resources {
		if filepath.Clean(r) == secretExampleFile {
			p = append(p, secretExampleFile+" is listed: it holds placeholders and must never be applied")
		}
	}
	for _, g := range append(slices.Clone(b.kust.ConfigMapGenerator), b.kust.SecretGenerator...) {
		keys, files := g.keys()
		if len(keys) == 0 {
			p = append(p, "generator "+g.Name+" makes no keys")
		}
		for _, f := range files {
			if _, err := os.Stat(f); err != nil {
				p = append(p, fmt.Sprintf("generator %s: %v", g.Name, err))
			}
			if filepath.IsAbs(f) || strings.HasPrefix(filepath.Clean(f), "..") {
				p = append(p, fmt.Sprintf("generator %s: %s is outside the kustomization root", g.Name, f))
			}
		}
	}
	for _, g := range b.kust.SecretGenerator {
		if len(g.Literals) > 0 {
			p = append(p, "secretGenerator "+g.Name+" has literal values committed to the repository")
		}
	}
	return p
}

func checkNamespace(b *bundle) (p []string) {
	ns := b.kust.Namespace
	if ns == "" {
		return []string{"kustomization sets no namespace"}
	}
	if !slices.ContainsFunc(b.namespaces, func(n *corev1.Namespace) bool { return n.Name == ns }) {
		p = append(p, "no Namespace object "+ns)
	}
	var metas []*metav1.ObjectMeta
	for _, s := range b.services {
		metas = append(metas, &s.ObjectMeta)
	}
	for _, w := range b.workloads() {
		metas = append(metas, &w.template.ObjectMeta)
	}
	for _, s := range b.exampleSecrets {
		metas = append(metas, &s.ObjectMeta)
		if s.Namespace != ns {
			p = append(p, fmt.Sprintf("%s: Secret %s is in namespace %q, want %q", secretExampleFile, s.Name, s.Namespace, ns))
		}
	}
	for _, m := range metas {
		if m.Namespace != "" && m.Namespace != ns {
			p = append(p, fmt.Sprintf("%s is in namespace %q, kustomization says %q", m.Name, m.Namespace, ns))
		}
	}
	return p
}

func checkWorkloadSelectors(b *bundle) (p []string) {
	for _, w := range b.workloads() {
		if !selects(w.selector, w.template.Labels) {
			p = append(p, fmt.Sprintf("%s: selector %v does not select its pod template labels %v", w, w.selector, w.template.Labels))
		}
		for _, other := range b.workloads() {
			if other.template != w.template && selects(w.selector, other.template.Labels) {
				p = append(p, fmt.Sprintf("%s: selector also selects the pods of %s", w, other))
			}
		}
	}
	return p
}

func checkServices(b *bundle) (p []string) {
	for _, s := range b.services {
		if len(s.Spec.Selector) == 0 {
			p = append(p, "Service "+s.Name+" has no selector")
			continue
		}
		sel := &metav1.LabelSelector{MatchLabels: s.Spec.Selector}
		ws := b.selected(sel)
		if len(ws) == 0 {
			p = append(p, fmt.Sprintf("Service %s: selector %v matches no workload's pods", s.Name, s.Spec.Selector))
		}
		if len(s.Spec.Ports) == 0 {
			p = append(p, "Service "+s.Name+" has no ports")
		}
		for _, port := range s.Spec.Ports {
			target := port.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(port.Port)
			}
			for _, w := range ws {
				if !podHasPort(&w.template.Spec, target) {
					p = append(p, fmt.Sprintf("Service %s port %s: targetPort %s is not a container port of %s", s.Name, port.Name, target.String(), w))
				}
			}
		}
	}
	return p
}

func checkStatefulSetServices(b *bundle) (p []string) {
	for _, s := range b.statefulSets {
		svc := b.service(s.Spec.ServiceName)
		switch {
		case s.Spec.ServiceName == "":
			p = append(p, "StatefulSet "+s.Name+" has no serviceName")
		case svc == nil:
			p = append(p, fmt.Sprintf("StatefulSet %s: serviceName %q is not a Service here", s.Name, s.Spec.ServiceName))
		case svc.Spec.ClusterIP != corev1.ClusterIPNone:
			p = append(p, fmt.Sprintf("StatefulSet %s: Service %s is not headless (clusterIP: None)", s.Name, svc.Name))
		case !selects(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, s.Spec.Template.Labels):
			p = append(p, fmt.Sprintf("StatefulSet %s: headless Service %s does not select its pods", s.Name, svc.Name))
		}
	}
	return p
}

func checkVolumes(b *bundle) (p []string) {
	for _, w := range b.workloads() {
		declared := map[string]bool{}
		for _, v := range w.template.Spec.Volumes {
			if declared[v.Name] {
				p = append(p, fmt.Sprintf("%s: volume %s declared twice", w, v.Name))
			}
			declared[v.Name] = true
		}
		for _, c := range w.claims {
			if declared[c.Name] {
				p = append(p, fmt.Sprintf("%s: claim template %s also declared as a volume", w, c.Name))
			}
			declared[c.Name] = true
			if c.Spec.Resources.Requests.Storage().IsZero() {
				p = append(p, fmt.Sprintf("%s: claim template %s requests no storage", w, c.Name))
			}
		}
		used := map[string]bool{}
		for _, c := range allContainers(&w.template.Spec) {
			paths := map[string]bool{}
			for _, m := range c.VolumeMounts {
				used[m.Name] = true
				if !declared[m.Name] {
					p = append(p, fmt.Sprintf("%s container %s: mount %s refers to no volume or claim template", w, c.Name, m.Name))
				}
				if paths[m.MountPath] {
					p = append(p, fmt.Sprintf("%s container %s: two mounts at %s", w, c.Name, m.MountPath))
				}
				paths[m.MountPath] = true
			}
		}
		for name := range declared {
			if !used[name] {
				p = append(p, fmt.Sprintf("%s: volume %s is mounted by no container", w, name))
			}
		}
	}
	return p
}

// imageTagProblem: a pinned image has a tag other than latest, or a digest.
func imageTagProblem(image string) string {
	if name, digest, ok := strings.Cut(image, "@"); ok {
		if !strings.HasPrefix(digest, "sha256:") || name == "" {
			return "malformed digest"
		}
		return ""
	}
	tag := ""
	if colon := strings.LastIndex(image, ":"); colon > strings.LastIndex(image, "/") {
		tag = image[colon+1:]
	}
	switch tag {
	case "":
		return "has no tag"
	case "latest":
		return "uses :latest"
	}
	return ""
}

func checkImages(b *bundle) (p []string) {
	for _, w := range b.workloads() {
		for _, c := range allContainers(&w.template.Spec) {
			if why := imageTagProblem(c.Image); why != "" {
				p = append(p, fmt.Sprintf("%s container %s: image %q %s", w, c.Name, c.Image, why))
			}
			if c.ImagePullPolicy == corev1.PullAlways {
				p = append(p, fmt.Sprintf("%s container %s: imagePullPolicy Always (tags are pinned)", w, c.Name))
			}
		}
	}
	return p
}

func checkResources(b *bundle) (p []string) {
	for _, w := range b.workloads() {
		for _, c := range allContainers(&w.template.Spec) {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				req, hasReq := c.Resources.Requests[r]
				lim, hasLim := c.Resources.Limits[r]
				if !hasReq || req.IsZero() {
					p = append(p, fmt.Sprintf("%s container %s: no %s request", w, c.Name, r))
				}
				if !hasLim || lim.IsZero() {
					p = append(p, fmt.Sprintf("%s container %s: no %s limit", w, c.Name, r))
				}
				if hasReq && hasLim && req.Cmp(lim) > 0 {
					p = append(p, fmt.Sprintf("%s container %s: %s request %s above limit %s", w, c.Name, r, req.String(), lim.String()))
				}
			}
		}
	}
	return p
}

func probePort(pr *corev1.Probe) (intstr.IntOrString, bool) {
	switch {
	case pr.HTTPGet != nil:
		return pr.HTTPGet.Port, true
	case pr.TCPSocket != nil:
		return pr.TCPSocket.Port, true
	case pr.GRPC != nil:
		return intstr.FromInt32(pr.GRPC.Port), true
	}
	return intstr.IntOrString{}, false
}

func checkProbes(b *bundle) (p []string) {
	for _, w := range b.workloads() {
		for _, c := range w.template.Spec.Containers {
			if c.LivenessProbe == nil || c.ReadinessProbe == nil {
				p = append(p, fmt.Sprintf("%s container %s: needs both a liveness and a readiness probe", w, c.Name))
			}
			for kind, pr := range map[string]*corev1.Probe{"startup": c.StartupProbe, "liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
				if pr == nil {
					continue
				}
				port, ok := probePort(pr)
				if !ok {
					if pr.Exec == nil {
						p = append(p, fmt.Sprintf("%s container %s: %s probe has no handler", w, c.Name, kind))
					}
					continue
				}
				if !hasPort(c, port) {
					p = append(p, fmt.Sprintf("%s container %s: %s probe port %s is not a port of the container", w, c.Name, kind, port.String()))
				}
			}
		}
	}
	return p
}

func checkReferences(b *bundle) (p []string) {
	cms, secrets := b.configMapKeys(), b.secretKeys()
	ref := func(w workload, what, kind, name, key string, have map[string][]string, optional bool) {
		keys, ok := have[name]
		switch {
		case optional:
		case !ok:
			p = append(p, fmt.Sprintf("%s %s: %s %q does not exist", w, what, kind, name))
		case key != "" && !slices.Contains(keys, key):
			p = append(p, fmt.Sprintf("%s %s: %s %q has no key %q", w, what, kind, name, key))
		}
	}
	for _, w := range b.workloads() {
		spec := &w.template.Spec
		for _, c := range allContainers(spec) {
			for _, e := range c.EnvFrom {
				if e.ConfigMapRef != nil {
					ref(w, "container "+c.Name+" envFrom", "ConfigMap", e.ConfigMapRef.Name, "", cms, ptrTrue(e.ConfigMapRef.Optional))
				}
				if e.SecretRef != nil {
					ref(w, "container "+c.Name+" envFrom", "Secret", e.SecretRef.Name, "", secrets, ptrTrue(e.SecretRef.Optional))
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					ref(w, "env "+e.Name, "ConfigMap", r.Name, r.Key, cms, ptrTrue(r.Optional))
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					ref(w, "env "+e.Name, "Secret", r.Name, r.Key, secrets, ptrTrue(r.Optional))
				}
			}
		}
		for _, v := range spec.Volumes {
			if v.ConfigMap != nil {
				ref(w, "volume "+v.Name, "ConfigMap", v.ConfigMap.Name, "", cms, ptrTrue(v.ConfigMap.Optional))
				for _, it := range v.ConfigMap.Items {
					ref(w, "volume "+v.Name, "ConfigMap", v.ConfigMap.Name, it.Key, cms, ptrTrue(v.ConfigMap.Optional))
				}
			}
			if v.Secret != nil {
				ref(w, "volume "+v.Name, "Secret", v.Secret.SecretName, "", secrets, ptrTrue(v.Secret.Optional))
				for _, it := range v.Secret.Items {
					ref(w, "volume "+v.Name, "Secret", v.Secret.SecretName, it.Key, secrets, ptrTrue(v.Secret.Optional))
				}
			}
			if v.Projected != nil {
				for _, src := range v.Projected.Sources {
					if src.ConfigMap != nil {
						ref(w, "volume "+v.Name, "ConfigMap", src.ConfigMap.Name, "", cms, ptrTrue(src.ConfigMap.Optional))
					}
					if src.Secret != nil {
						ref(w, "volume "+v.Name, "Secret", src.Secret.Name, "", secrets, ptrTrue(src.Secret.Optional))
					}
				}
			}
		}
	}
	return p
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// checkSecurity: the restricted Pod Security profile, plus no service account
// token and no service-link variables (they could shadow SESSIONLOG_ flags).
func checkSecurity(b *bundle) (p []string) {
	for _, w := range b.workloads() {
		spec := &w.template.Spec
		psc := spec.SecurityContext
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			p = append(p, fmt.Sprintf("%s: automountServiceAccountToken is not false", w))
		}
		if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
			p = append(p, fmt.Sprintf("%s: enableServiceLinks is not false", w))
		}
		if spec.HostNetwork || spec.HostPID || spec.HostIPC {
			p = append(p, fmt.Sprintf("%s: uses host namespaces", w))
		}
		if psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			p = append(p, fmt.Sprintf("%s: pod seccompProfile is not RuntimeDefault", w))
		}
		for _, c := range allContainers(spec) {
			sc := c.SecurityContext
			if sc == nil {
				p = append(p, fmt.Sprintf("%s container %s: no securityContext", w, c.Name))
				continue
			}
			nonRoot := (psc != nil && ptrTrue(psc.RunAsNonRoot)) || ptrTrue(sc.RunAsNonRoot)
			if !nonRoot || ptrTrue(sc.Privileged) {
				p = append(p, fmt.Sprintf("%s container %s: not runAsNonRoot", w, c.Name))
			}
			uid := sc.RunAsUser
			if uid == nil && psc != nil {
				uid = psc.RunAsUser
			}
			if uid == nil || *uid == 0 {
				p = append(p, fmt.Sprintf("%s container %s: no non-zero runAsUser", w, c.Name))
			}
			if !ptrTrue(sc.ReadOnlyRootFilesystem) {
				p = append(p, fmt.Sprintf("%s container %s: root filesystem is not read-only", w, c.Name))
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				p = append(p, fmt.Sprintf("%s container %s: allowPrivilegeEscalation is not false", w, c.Name))
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				p = append(p, fmt.Sprintf("%s container %s: capabilities must drop ALL and add none", w, c.Name))
			}
		}
	}
	return p
}

// checkScheduling: anti-affinity and spread constraints must select the pods
// of their own workload, or they spread nothing.
func checkScheduling(b *bundle) (p []string) {
	for _, w := range b.workloads() {
		spec := &w.template.Spec
		for _, t := range spec.TopologySpreadConstraints {
			if !selects(t.LabelSelector, w.template.Labels) {
				p = append(p, fmt.Sprintf("%s: topologySpreadConstraint on %s does not select its own pods", w, t.TopologyKey))
			}
		}
		if a := spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				if !selects(t.LabelSelector, w.template.Labels) {
					p = append(p, fmt.Sprintf("%s: podAntiAffinity on %s does not select its own pods", w, t.TopologyKey))
				}
			}
			for _, t := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
				if !selects(t.PodAffinityTerm.LabelSelector, w.template.Labels) {
					p = append(p, fmt.Sprintf("%s: preferred podAntiAffinity on %s does not select its own pods", w, t.PodAffinityTerm.TopologyKey))
				}
			}
		}
		if w.replicas != nil && *w.replicas > 1 && len(spec.TopologySpreadConstraints) == 0 &&
			(spec.Affinity == nil || spec.Affinity.PodAntiAffinity == nil) {
			p = append(p, fmt.Sprintf("%s: %d replicas but nothing spreads them over nodes", w, *w.replicas))
		}
	}
	if s := b.natsStatefulSet(); s != nil {
		// One NATS server per node, required: losing a node must cost one copy of R3.
		ok := false
		if a := s.Spec.Template.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
			for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
				ok = ok || (t.TopologyKey == "kubernetes.io/hostname" && selects(t.LabelSelector, s.Spec.Template.Labels))
			}
		}
		for _, t := range s.Spec.Template.Spec.TopologySpreadConstraints {
			ok = ok || (t.TopologyKey == "kubernetes.io/hostname" && t.WhenUnsatisfiable == corev1.DoNotSchedule &&
				t.MaxSkew == 1 && selects(t.LabelSelector, s.Spec.Template.Labels))
		}
		if !ok {
			p = append(p, "StatefulSet nats: nothing forces its replicas onto different nodes")
		}
	}
	return p
}

func checkPDBs(b *bundle) (p []string) {
	for _, d := range b.pdbs {
		ws := b.selected(d.Spec.Selector)
		if len(ws) == 0 {
			p = append(p, fmt.Sprintf("PodDisruptionBudget %s: selector matches no workload's pods", d.Name))
		}
		if d.Spec.MaxUnavailable == nil && d.Spec.MinAvailable == nil {
			p = append(p, fmt.Sprintf("PodDisruptionBudget %s: neither maxUnavailable nor minAvailable", d.Name))
		}
	}
	s := b.natsStatefulSet()
	if s == nil {
		return p
	}
	var natsPDBs []*policyv1.PodDisruptionBudget
	for _, d := range b.pdbs {
		if selects(d.Spec.Selector, s.Spec.Template.Labels) {
			natsPDBs = append(natsPDBs, d)
		}
	}
	if len(natsPDBs) != 1 {
		return append(p, fmt.Sprintf("%d PodDisruptionBudgets select the NATS pods, want 1", len(natsPDBs)))
	}
	if mu := natsPDBs[0].Spec.MaxUnavailable; mu == nil || *mu != intstr.FromInt32(1) || natsPDBs[0].Spec.MinAvailable != nil {
		p = append(p, fmt.Sprintf("PodDisruptionBudget %s: want maxUnavailable: 1 (R3 keeps quorum with one server down)", natsPDBs[0].Name))
	}
	return p
}

func checkNetworkPolicies(b *bundle) (p []string) {
	for _, np := range b.netpols {
		ws := b.selected(&np.Spec.PodSelector)
		if len(ws) == 0 {
			p = append(p, fmt.Sprintf("NetworkPolicy %s: podSelector matches no workload's pods", np.Name))
		}
		for _, rule := range np.Spec.Ingress {
			for _, from := range rule.From {
				if from.PodSelector != nil && from.NamespaceSelector == nil && len(b.selected(from.PodSelector)) == 0 {
					p = append(p, fmt.Sprintf("NetworkPolicy %s: a from.podSelector matches no workload's pods", np.Name))
				}
			}
			for _, port := range rule.Ports {
				if port.Port == nil {
					continue
				}
				for _, w := range ws {
					if !podHasPort(&w.template.Spec, *port.Port) {
						p = append(p, fmt.Sprintf("NetworkPolicy %s: port %s is not a container port of %s", np.Name, port.Port.String(), w))
					}
				}
			}
		}
	}
	// Routes carry no credentials: the cluster port must be open to the NATS
	// pods only.
	s := b.natsStatefulSet()
	if s == nil || len(s.Spec.Template.Spec.Containers) == 0 || b.nats.opts == nil {
		return p
	}
	cluster := intstr.FromInt32(int32(b.nats.opts.Cluster.Port))
	c := s.Spec.Template.Spec.Containers[0]
	guarded := false
	for _, np := range b.netpols {
		if !selects(&np.Spec.PodSelector, s.Spec.Template.Labels) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		guarded = true
		for _, rule := range np.Spec.Ingress {
			allowsCluster := len(rule.Ports) == 0
			for _, port := range rule.Ports {
				if port.Port == nil || samePort(c, *port.Port, cluster) {
					allowsCluster = true
				}
			}
			if !allowsCluster {
				continue
			}
			onlyNATS := len(rule.From) > 0
			for _, from := range rule.From {
				if from.PodSelector == nil || from.NamespaceSelector != nil || from.IPBlock != nil || !selects(from.PodSelector, s.Spec.Template.Labels) {
					onlyNATS = false
				}
			}
			if !onlyNATS {
				p = append(p, fmt.Sprintf("NetworkPolicy %s: the NATS cluster port %d is open to more than the NATS pods", np.Name, cluster.IntVal))
			}
		}
	}
	if !guarded {
		p = append(p, "no NetworkPolicy guards the NATS cluster port")
	}
	return p
}

// samePort: does port a (name or number) of container c denote number b?
func samePort(c corev1.Container, a, b intstr.IntOrString) bool {
	if a.Type == intstr.Int {
		return a.IntVal == b.IntVal
	}
	return containerPort(c, a.StrVal) == b.IntVal
}

// checkNATS compares nats.conf, as nats-server parsed it, with the StatefulSet
// that runs it.
func checkNATS(b *bundle) (p []string) {
	s := b.natsStatefulSet()
	if s == nil {
		return []string{"no StatefulSet " + natsName}
	}
	o := b.nats.opts
	if s.Spec.Replicas == nil || *s.Spec.Replicas != natsReplicas {
		p = append(p, fmt.Sprintf("replicas %v, want %d", s.Spec.Replicas, natsReplicas))
	}
	if s.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		p = append(p, "podManagementPolicy must be Parallel: readiness needs a quorum, OrderedReady would never start pod 1")
	}
	spec := &s.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		return append(p, fmt.Sprintf("%d containers, want 1", len(spec.Containers)))
	}
	c := spec.Containers[0]

	// Acknowledged means fsynced by a quorum (DESIGN.md section 4): the
	// server's default flushes every 2 minutes.
	if !o.SyncAlways {
		p = append(p, "jetstream sync_interval is not always: an acknowledged event is not fsynced before its ack")
	}

	// Routes: exactly one per ordinal, through the headless service, to the cluster port.
	if o.Cluster.Name == "" {
		p = append(p, "cluster has no name")
	}
	clusterPort := containerPort(c, "cluster")
	if clusterPort == 0 || int(clusterPort) != o.Cluster.Port {
		p = append(p, fmt.Sprintf("cluster port %d in nats.conf, container port \"cluster\" %d", o.Cluster.Port, clusterPort))
	}
	if hs := b.service(s.Spec.ServiceName); hs == nil || !hs.Spec.PublishNotReadyAddresses {
		p = append(p, "headless Service "+s.Spec.ServiceName+" must set publishNotReadyAddresses: routes resolve before the pods are ready")
	}
	replicas := natsReplicas
	if s.Spec.Replicas != nil {
		replicas = int(*s.Spec.Replicas)
	}
	seen := map[int]int{}
	for _, r := range o.Routes {
		host, port := r.Hostname(), r.Port()
		ord := -1
		for i := range replicas {
			base := fmt.Sprintf("%s-%d.%s", s.Name, i, s.Spec.ServiceName)
			if host == base || host == base+"."+b.kust.Namespace || strings.HasPrefix(host, base+"."+b.kust.Namespace+".") {
				ord = i
			}
		}
		if ord < 0 {
			p = append(p, fmt.Sprintf("route %s names no pod %s-N.%s", r, s.Name, s.Spec.ServiceName))
			continue
		}
		seen[ord]++
		if port != strconv.Itoa(int(clusterPort)) {
			p = append(p, fmt.Sprintf("route %s: port %s, the cluster port is %d", r, port, clusterPort))
		}
		if r.Scheme != "nats" {
			p = append(p, fmt.Sprintf("route %s: scheme %s", r, r.Scheme))
		}
	}
	for i := range replicas {
		if seen[i] != 1 {
			p = append(p, fmt.Sprintf("%d routes to ordinal %d, want 1", seen[i], i))
		}
	}
	if len(o.Routes) != replicas {
		p = append(p, fmt.Sprintf("%d routes for %d replicas", len(o.Routes), replicas))
	}

	// server_name from the pod name.
	if !b.nats.serverNameFollowsPod {
		p = append(p, "server_name does not follow $POD_NAME")
	}
	if e := envVar(c, "POD_NAME"); e == nil || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		p = append(p, "env POD_NAME must come from fieldRef metadata.name")
	}
	// Every variable the config refers to is set in the container.
	for v := range b.nats.vars {
		if envVar(c, v) == nil {
			p = append(p, "nats.conf refers to $"+v+", which the container does not set")
		}
	}

	// JetStream store on the claim, mounted at exactly store_dir.
	if !o.JetStream {
		p = append(p, "JetStream is not enabled")
	}
	dataMount := mountPath(c, natsDataVolume)
	isClaim := slices.ContainsFunc(s.Spec.VolumeClaimTemplates, func(pvc corev1.PersistentVolumeClaim) bool { return pvc.Name == natsDataVolume })
	if !isClaim {
		p = append(p, "no volumeClaimTemplate "+natsDataVolume)
	}
	if dataMount == "" || filepath.Clean(o.StoreDir) != filepath.Clean(dataMount) {
		p = append(p, fmt.Sprintf("JetStream store_dir %q is not the mount path %q of the %s claim", o.StoreDir, dataMount, natsDataVolume))
	}
	for _, pvc := range s.Spec.VolumeClaimTemplates {
		if pvc.Name == natsDataVolume && o.JetStreamMaxStore > 0 {
			if size := pvc.Spec.Resources.Requests.Storage(); size.Cmp(*resource.NewQuantity(o.JetStreamMaxStore, resource.BinarySI)) < 0 {
				p = append(p, fmt.Sprintf("max_file_store %d is larger than the claim (%s)", o.JetStreamMaxStore, size))
			}
		}
	}

	// Ports and probes.
	if cp := containerPort(c, "client"); cp == 0 || int(cp) != o.Port {
		p = append(p, fmt.Sprintf("client port %d in nats.conf, container port \"client\" %d", o.Port, cp))
	}
	monitor := containerPort(c, "monitor")
	if monitor == 0 || int(monitor) != o.HTTPPort {
		p = append(p, fmt.Sprintf("http (monitor) port %d in nats.conf, container port \"monitor\" %d", o.HTTPPort, monitor))
	}
	// startup and liveness: the server and JetStream are up (a server that is
	// catching up, or has lost quorum, must not be restarted for it);
	// readiness: everything current, so a rolling update waits for it.
	wantProbe := map[string]struct {
		pr   *corev1.Probe
		path string
	}{
		"startup":   {c.StartupProbe, "/healthz?js-enabled-only=true"},
		"liveness":  {c.LivenessProbe, "/healthz?js-enabled-only=true"},
		"readiness": {c.ReadinessProbe, "/healthz"},
	}
	for kind, want := range wantProbe {
		if want.pr == nil || want.pr.HTTPGet == nil {
			p = append(p, kind+" probe missing or not HTTP")
			continue
		}
		if !samePort(c, want.pr.HTTPGet.Port, intstr.FromInt32(int32(o.HTTPPort))) {
			p = append(p, fmt.Sprintf("%s probe is not on the monitoring port %d", kind, o.HTTPPort))
		}
		if want.pr.HTTPGet.Path != want.path {
			p = append(p, fmt.Sprintf("%s probe path %q, want %q", kind, want.pr.HTTPGet.Path, want.path))
		}
	}

	// Config file: the command reads nats.conf from the ConfigMap mount.
	cmd := append(slices.Clone(c.Command), c.Args...)
	confPath := ""
	for i, a := range cmd {
		if (a == "--config" || a == "-c") && i+1 < len(cmd) {
			confPath = cmd[i+1]
		}
	}
	configMounted := false
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == natsConfigMap && mountPath(c, v.Name) != "" &&
			confPath == filepath.Join(mountPath(c, v.Name), natsConfFile) {
			configMounted = true
		}
	}
	if !configMounted {
		p = append(p, fmt.Sprintf("--config %q is not %s in the mounted ConfigMap %s", confPath, natsConfFile, natsConfigMap))
	}
	// What nats.conf includes is read from the same directory in the pod, so
	// it must be a key of the same ConfigMap (the test parsed the files here).
	keys := b.configMapKeys()[natsConfigMap]
	for _, inc := range b.nats.includes {
		if !slices.Contains(keys, inc) {
			p = append(p, fmt.Sprintf("nats.conf includes %s, which ConfigMap %s does not hold", inc, natsConfigMap))
		}
	}
	if len(b.nats.includes) == 0 {
		p = append(p, "nats.conf includes no permission config")
	}

	// Lame duck on preStop, through the pid file, inside the grace period.
	if o.PidFile == "" {
		p = append(p, "nats.conf sets no pid_file")
	} else {
		pidDir := filepath.Dir(o.PidFile)
		onEmptyDir := false
		for _, v := range spec.Volumes {
			if v.EmptyDir != nil && mountPath(c, v.Name) == pidDir {
				onEmptyDir = true
			}
		}
		if !onEmptyDir {
			p = append(p, fmt.Sprintf("pid_file %s is not on a writable emptyDir mount", o.PidFile))
		}
	}
	ldm := c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Exec != nil &&
		strings.Contains(strings.Join(c.Lifecycle.PreStop.Exec.Command, " "), "ldm="+o.PidFile) && o.PidFile != ""
	if !ldm {
		p = append(p, "preStop does not signal lame duck mode (ldm=<pid_file>)")
	}
	grace := 30 * time.Second
	if spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
	}
	if o.LameDuckDuration == 0 || o.LameDuckDuration+o.LameDuckGracePeriod >= grace {
		p = append(p, fmt.Sprintf("lame duck %v + %v does not fit in terminationGracePeriodSeconds %v", o.LameDuckDuration, o.LameDuckGracePeriod, grace))
	}

	// The services' user: exists, and its password is the same Secret key the
	// services send.
	if b.serviceUserPasswordRef() == nil {
		p = append(p, fmt.Sprintf("no user %q whose password the NATS container takes from a Secret", serviceNATSUser))
	}
	// Each user grants exactly what deploy/nats/perms.go defines (the same
	// definition `sessionlog up` runs with): the services every subject
	// they use, agents none of the log, the JetStream API or the services'
	// inboxes.
	if b.nats.opts != nil {
		want := map[string]*server.Permissions{
			serviceNATSUser: natsauth.Service(),
			eraserNATSUser:  natsauth.Eraser(),
			"agent":         natsauth.Agent(),
			"operator":      natsauth.Operator(),
		}
		for _, u := range b.nats.opts.Users {
			if w, ok := want[u.Username]; ok {
				delete(want, u.Username)
				if !natsauth.Equal(u.Permissions, w) {
					p = append(p, fmt.Sprintf("user %q has other permissions than deploy/nats/perms.go defines", u.Username))
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(want)) {
			p = append(p, fmt.Sprintf("no user %q in auth.conf", name))
		}
	}
	return p
}

// serviceUserPasswordRef: the Secret key from which the NATS container takes
// the password of the "service" user in auth.conf.
func (b *bundle) serviceUserPasswordRef() *corev1.SecretKeySelector {
	return b.userPasswordRef(serviceNATSUser)
}

// natsUserOf is the NATS user a component logs in as: the eraser erases
// (sessions.api.erase, retention), and the repairer, which did before the
// eraser was its own service, keeps that user; the others are "service".
func natsUserOf(component string) string {
	if component == "eraser" || component == "repairer" {
		return eraserNATSUser
	}
	return serviceNATSUser
}

// userPasswordRef: the Secret key from which the NATS container takes the
// password of a user in auth.conf.
func (b *bundle) userPasswordRef(name string) *corev1.SecretKeySelector {
	s := b.natsStatefulSet()
	if s == nil || b.nats.opts == nil || len(s.Spec.Template.Spec.Containers) == 0 {
		return nil
	}
	for _, u := range b.nats.opts.Users {
		if u.Username != name {
			continue
		}
		for v, val := range b.nats.vars {
			if val != u.Password {
				continue
			}
			if e := envVar(s.Spec.Template.Spec.Containers[0], v); e != nil && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return e.ValueFrom.SecretKeyRef
			}
		}
	}
	return nil
}

// parseArgs splits "sub --flag value --flag=value ..." into the subcommand and flags.
func parseArgs(args []string) (sub string, flags map[string]string, err error) {
	if len(args) == 0 {
		return "", nil, errors.New("no arguments")
	}
	sub, flags = args[0], map[string]string{}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			return "", nil, fmt.Errorf("argument %q is not a --flag", a)
		}
		if k, v, ok := strings.Cut(a, "="); ok {
			flags[k] = v
			continue
		}
		if i+1 >= len(args) {
			return "", nil, fmt.Errorf("flag %s has no value", a)
		}
		flags[a] = args[i+1]
		i++
	}
	return sub, flags, nil
}

func checkSessionlogServices(b *bundle) (p []string) {
	found := map[string]bool{}
	images := map[string]bool{}
	for _, w := range b.workloads() {
		comp := w.template.Labels[componentLabel]
		want, ok := components[comp]
		if !ok {
			continue
		}
		natsUser := natsUserOf(comp)
		svcRef := b.userPasswordRef(natsUser)
		found[comp] = true
		if w.kind != want.kind {
			p = append(p, fmt.Sprintf("%s: %s must be a %s", w, comp, want.kind))
		}
		if w.replicas == nil || *w.replicas < want.minReplicas || *w.replicas > want.maxReplicas {
			p = append(p, fmt.Sprintf("%s: replicas %v, want %d..%d", w, w.replicas, want.minReplicas, want.maxReplicas))
		}
		if len(w.template.Spec.Containers) != 1 {
			p = append(p, fmt.Sprintf("%s: %d containers, want 1", w, len(w.template.Spec.Containers)))
			continue
		}
		c := w.template.Spec.Containers[0]
		name, _, _ := strings.Cut(c.Image, ":")
		if filepath.Base(name) != sessionlogImage {
			p = append(p, fmt.Sprintf("%s: image %s is not the sessionlog image", w, c.Image))
		}
		images[c.Image] = true
		sub, flags, err := parseArgs(c.Args)
		if err != nil {
			p = append(p, fmt.Sprintf("%s: args: %v", w, err))
			continue
		}
		if sub != comp {
			p = append(p, fmt.Sprintf("%s: runs subcommand %q, labelled %q", w, sub, comp))
		}
		// --nats-url: a Service here that reaches the NATS pods on that port.
		if u, err := url.Parse(flags[natsURLFlag]); err != nil || u.Scheme != "nats" || u.Hostname() == "" {
			p = append(p, fmt.Sprintf("%s: %s %q is not nats://host:port", w, natsURLFlag, flags[natsURLFlag]))
		} else {
			labels := strings.Split(u.Hostname(), ".")
			svc := b.service(labels[0])
			portOK := false
			if svc != nil {
				for _, sp := range svc.Spec.Ports {
					portOK = portOK || strconv.Itoa(int(sp.Port)) == u.Port()
				}
			}
			nats := b.natsStatefulSet()
			switch {
			case len(labels) > 1 && labels[1] != b.kust.Namespace:
				p = append(p, fmt.Sprintf("%s: %s names namespace %s", w, natsURLFlag, labels[1]))
			case svc == nil:
				p = append(p, fmt.Sprintf("%s: %s host %s is not a Service here", w, natsURLFlag, labels[0]))
			case nats == nil || !selects(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, nats.Spec.Template.Labels):
				p = append(p, fmt.Sprintf("%s: Service %s does not lead to the NATS pods", w, svc.Name))
			case !portOK:
				p = append(p, fmt.Sprintf("%s: Service %s has no port %s", w, svc.Name, u.Port()))
			}
		}
		// --http-listen on all interfaces, on the port the probes use.
		hp := containerPort(c, httpPortName)
		host, port, err := net.SplitHostPort(flags[httpListenFlag])
		if err != nil || host != "0.0.0.0" {
			p = append(p, fmt.Sprintf("%s: %s %q, want 0.0.0.0:<port>", w, httpListenFlag, flags[httpListenFlag]))
		} else if hp == 0 || strconv.Itoa(int(hp)) != port {
			p = append(p, fmt.Sprintf("%s: listens on %s, container port %q is %d", w, port, httpPortName, hp))
		}
		for kind, path := range map[string]string{"liveness": "/healthz", "readiness": "/readyz"} {
			pr := c.LivenessProbe
			if kind == "readiness" {
				pr = c.ReadinessProbe
			}
			if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != path || !samePort(c, pr.HTTPGet.Port, intstr.FromInt32(hp)) {
				p = append(p, fmt.Sprintf("%s: %s probe must be GET %s on the %s port", w, kind, path, httpPortName))
			}
		}
		// The scrape annotation names a port that serves /metrics without
		// the API token: the HTTP port when the service takes no token,
		// else the port of --metrics-listen (on all interfaces).
		if ann := w.template.Annotations; ann["prometheus.io/scrape"] == "true" {
			scrape := ann["prometheus.io/port"]
			served := strconv.Itoa(int(hp))
			if envVar(c, "SESSIONLOG_HTTP_TOKEN") != nil || flags["--http-token"] != "" {
				served = ""
				if host, port, err := net.SplitHostPort(flags["--metrics-listen"]); err == nil && host == "0.0.0.0" {
					served = port
				}
			}
			if served == "" || scrape != served || ann["prometheus.io/path"] != "/metrics" {
				p = append(p, fmt.Sprintf("%s: scraped at port %q path %q, but /metrics without a token is served at port %q", w, scrape, ann["prometheus.io/path"], served))
			}
		}
		// The Go heap's soft limit (--memory-limit, or the command's
		// default) well under the container's memory limit (at most
		// three quarters): a soft limit at the kill line cannot work.
		if def, ok := memoryLimitDefaults[w.name]; ok {
			soft := def
			if v, given := flags["--memory-limit"]; given {
				q, err := resource.ParseQuantity(strings.TrimSuffix(v, "B"))
				if err != nil {
					p = append(p, fmt.Sprintf("%s: --memory-limit %q: %v", w, v, err))
				}
				soft = q.Value()
			}
			if lim := c.Resources.Limits.Memory(); lim.IsZero() || soft > lim.Value()*3/4 {
				p = append(p, fmt.Sprintf("%s: the heap's soft limit %d MiB is over three quarters of limits.memory %s", w, soft>>20, lim))
			}
		}
		// --data-dir on a claim (projector), nowhere else.
		dataDir, hasDataDir := flags[dataDirFlag]
		if want.dataDir {
			onClaim := false
			for _, pvc := range w.claims {
				onClaim = onClaim || (dataDir != "" && mountPath(c, pvc.Name) == dataDir)
			}
			if !onClaim {
				p = append(p, fmt.Sprintf("%s: %s %q is not the mount of a volume claim", w, dataDirFlag, dataDir))
			}
		} else if hasDataDir {
			p = append(p, fmt.Sprintf("%s: %s given to a stateless service", w, dataDirFlag))
		}
		// NATS credentials: the component's user ("service", "eraser" for the eraser and the repairer), with the password the server expects.
		user := envVar(c, natsUserEnv)
		switch {
		case user == nil:
			p = append(p, fmt.Sprintf("%s: no %s", w, natsUserEnv))
		case user.ValueFrom != nil && user.ValueFrom.SecretKeyRef != nil:
			if v, ok := b.secretValue(user.ValueFrom.SecretKeyRef); !ok || v != natsUser {
				p = append(p, fmt.Sprintf("%s: %s resolves to %q, want %q", w, natsUserEnv, v, natsUser))
			}
		case user.Value != natsUser:
			p = append(p, fmt.Sprintf("%s: %s is %q, want %q", w, natsUserEnv, user.Value, natsUser))
		}
		pw := envVar(c, natsPasswordEnv)
		if pw == nil || pw.ValueFrom == nil || pw.ValueFrom.SecretKeyRef == nil {
			p = append(p, fmt.Sprintf("%s: %s must come from a Secret", w, natsPasswordEnv))
		} else if svcRef == nil || pw.ValueFrom.SecretKeyRef.Name != svcRef.Name || pw.ValueFrom.SecretKeyRef.Key != svcRef.Key {
			p = append(p, fmt.Sprintf("%s: %s comes from %s/%s, the NATS server reads the %s password from %v",
				w, natsPasswordEnv, pw.ValueFrom.SecretKeyRef.Name, pw.ValueFrom.SecretKeyRef.Key, natsUser, svcRef))
		}
		for _, e := range c.Env {
			if !strings.HasPrefix(e.Name, sessionlogPrefix) && e.Name != "GOMEMLIMIT" && e.Name != "GOMAXPROCS" {
				p = append(p, fmt.Sprintf("%s: env %s is not a SESSIONLOG_ flag", w, e.Name))
			}
			lower := strings.ToLower(e.Name)
			if e.Value != "" && (strings.Contains(lower, "password") || strings.Contains(lower, "token")) {
				p = append(p, fmt.Sprintf("%s: env %s holds a literal secret", w, e.Name))
			}
		}
	}
	for comp := range components {
		if !found[comp] {
			p = append(p, "no workload runs the "+comp)
		}
	}
	if len(images) > 1 {
		var list []string
		for i := range images {
			list = append(list, i)
		}
		sort.Strings(list)
		p = append(p, fmt.Sprintf("the services run different images %v: they ship as one", list))
	}
	for _, g := range b.kust.ConfigMapGenerator {
		if g.Name == natsConfigMap {
			continue
		}
		for _, l := range g.Literals {
			if k, _, _ := strings.Cut(l, "="); !strings.HasPrefix(k, sessionlogPrefix) {
				p = append(p, fmt.Sprintf("configMapGenerator %s: %s is not a SESSIONLOG_ flag", g.Name, k))
			}
		}
	}
	return p
}

// ---------------------------------------------------------------------------
// Tests

func TestManifests(t *testing.T) {
	b := loadBundle(t)
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			for _, p := range c.fn(b) {
				t.Error(p)
			}
		})
	}
	// Sanity: the bundle holds what the checks are about.
	if len(b.workloads()) != 7 || len(b.services) < 4 || len(b.pdbs) < 1 || len(b.netpols) < 1 {
		t.Errorf("unexpected bundle: %d workloads, %d services, %d PDBs, %d NetworkPolicies",
			len(b.workloads()), len(b.services), len(b.pdbs), len(b.netpols))
	}
}

// Every manifest in the directory is applied by the kustomization, except the
// Secret example: no stray manifest is silently left out.
func TestEveryManifestIsListed(t *testing.T) {
	k := readKustomization(t)
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f == kustomizationFile || f == secretExampleFile {
			continue
		}
		if !slices.Contains(k.Resources, f) {
			t.Errorf("%s is not listed in %s", f, kustomizationFile)
		}
	}
}

func TestStrictDecoding(t *testing.T) {
	good := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: x
spec:
  replicas: 1
`
	if _, err := decodeManifests([]byte(good + "---\n# only a comment\n---\n" + good)); err != nil {
		t.Fatalf("valid multi-document input refused: %v", err)
	}
	bad := map[string]string{
		"unknown field":       strings.Replace(good, "replicas: 1", "replica: 1", 1),
		"wrong case":          strings.Replace(good, "replicas: 1", "Replicas: 1", 1),
		"duplicate field":     good + "  replicas: 2\n",
		"wrong type":          strings.Replace(good, "replicas: 1", "replicas: two", 1),
		"unknown kind":        strings.Replace(good, "kind: Deployment", "kind: Deploymint", 1),
		"kind in wrong group": strings.Replace(good, "apiVersion: apps/v1", "apiVersion: v1", 1),
		"no name":             strings.Replace(good, "name: x", "labels: {}", 1),
		"bad second document": good + "---\n" + strings.Replace(good, "replicas: 1", "replicas: 1\n  selectr: {}", 1),
		"nested unknown":      good + "  template:\n    spec:\n      containers:\n        - name: c\n          imag: x\n",
	}
	for name, doc := range bad {
		if _, err := decodeManifests([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

func TestImageTagRule(t *testing.T) {
	for image, ok := range map[string]bool{
		"nats:2.15.3-alpine":                  true,
		"registry:5000/team/sessionlog:0.1.0": true,
		"sessionlog@sha256:0123abcd":          true,
		"sessionlog":                          false,
		"sessionlog:latest":                   false,
		"registry:5000/sessionlog":            false,
	} {
		if got := imageTagProblem(image) == ""; got != ok {
			t.Errorf("%s: pinned=%v, want %v", image, got, ok)
		}
	}
}

func TestConfigVars(t *testing.T) {
	got := configVars("a: $ONE # $COMMENT\nb: \"$JS.API.>\"\nc: [$TWO, '$Q']\n// $C2\nd: $ONE\n")
	if !slices.Equal(got, []string{"ONE", "TWO"}) {
		t.Errorf("configVars = %v", got)
	}
}

// TestCheckersCatch breaks the decoded manifests one way at a time and wants
// the matching check to report it: a check that cannot fail checks nothing.
func TestCheckersCatch(t *testing.T) {
	natsC := func(b *bundle) *corev1.Container { return &b.natsStatefulSet().Spec.Template.Spec.Containers[0] }
	dep := func(b *bundle, name string) *appsv1.Deployment {
		for _, d := range b.deployments {
			if d.Name == name {
				return d
			}
		}
		t.Fatalf("no Deployment %s", name)
		return nil
	}
	sts := func(b *bundle, name string) *appsv1.StatefulSet {
		for _, s := range b.statefulSets {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no StatefulSet %s", name)
		return nil
	}
	writerC := func(b *bundle) *corev1.Container { return &dep(b, "writer").Spec.Template.Spec.Containers[0] }
	projC := func(b *bundle) *corev1.Container { return &sts(b, "projector").Spec.Template.Spec.Containers[0] }
	setArg := func(c *corev1.Container, flag, value string) {
		for i := range c.Args {
			if c.Args[i] == flag {
				c.Args[i+1] = value
				return
			}
		}
		t.Fatalf("container %s has no %s", c.Name, flag)
	}
	f := false
	tr := true

	cases := []struct {
		name   string
		break_ func(b *bundle)
		want   string
	}{
		{"secret example applied", func(b *bundle) { b.kust.Resources = append(b.kust.Resources, secretExampleFile) }, "must never be applied"},
		{"service user without the fork bucket", func(b *bundle) {
			for _, u := range b.nats.opts.Users {
				if u.Username == serviceNATSUser {
					u.Permissions.Publish.Allow = slices.DeleteFunc(u.Permissions.Publish.Allow, func(s string) bool { return s == "$KV.SESSION_FORKS.>" })
				}
			}
		}, `user "service" has other permissions than deploy/nats/perms.go defines`},
		{"agent reads every inbox", func(b *bundle) {
			for _, u := range b.nats.opts.Users {
				if u.Username == "agent" {
					u.Permissions.Subscribe.Deny = nil
				}
			}
		}, `user "agent" has other permissions than deploy/nats/perms.go defines`},
		{"generator file outside root", func(b *bundle) {
			b.kust.ConfigMapGenerator[0].Files = append(b.kust.ConfigMapGenerator[0].Files, "../nats/auth.conf")
		}, "outside the kustomization root"},
		{"wrong namespace", func(b *bundle) { b.services[0].Namespace = "default" }, "kustomization says"},
		{"deployment selector", func(b *bundle) {
			dep(b, "writer").Spec.Selector.MatchLabels[componentLabel] = "writr"
		}, "does not select its pod template labels"},
		{"overlapping selectors", func(b *bundle) {
			dep(b, "writer").Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "sessionlog"}}
		}, "also selects the pods of"},
		{"service selects nothing", func(b *bundle) { b.service("projector").Spec.Selector[componentLabel] = "projektor" }, "matches no workload's pods"},
		{"service target port name", func(b *bundle) {
			b.service("nats").Spec.Ports[0].TargetPort = intstr.FromString("clients")
		}, "targetPort clients is not a container port"},
		{"scrape behind the token", func(b *bundle) {
			sts(b, "projector").Spec.Template.Annotations["prometheus.io/port"] = "8080"
		}, "without a token is served at port"},
		{"soft limit at the kill line", func(b *bundle) {
			dep(b, "repairer").Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("256Mi")
		}, "over three quarters of limits.memory"},
		{"service target port number", func(b *bundle) {
			b.service("projector").Spec.Ports[0].TargetPort = intstr.FromInt32(9099)
		}, "targetPort 9099 is not a container port"},
		{"statefulset serviceName", func(b *bundle) { sts(b, "projector").Spec.ServiceName = "projector-hedless" }, "is not a Service here"},
		{"statefulset service not headless", func(b *bundle) { b.service("nats-headless").Spec.ClusterIP = "" }, "is not headless"},
		{"mount without volume", func(b *bundle) { writerC(b).VolumeMounts[0].Name = "temp" }, "refers to no volume"},
		{"claim not mounted", func(b *bundle) { projC(b).VolumeMounts = projC(b).VolumeMounts[1:] }, "volume pebble is mounted by no container"},
		{"store_dir not the mount", func(b *bundle) {
			for i := range natsC(b).VolumeMounts {
				if natsC(b).VolumeMounts[i].Name == natsDataVolume {
					natsC(b).VolumeMounts[i].MountPath = "/data/jetstream"
				}
			}
		}, "is not the mount path"},
		{"store bigger than claim", func(b *bundle) { b.nats.opts.JetStreamMaxStore = 1 << 40 }, "larger than the claim"},
		{"lazy fsync", func(b *bundle) { b.nats.opts.SyncAlways = false }, "sync_interval is not always"},
		{"nats replicas", func(b *bundle) { two := int32(2); b.natsStatefulSet().Spec.Replicas = &two }, "replicas"},
		{"route missing", func(b *bundle) { b.nats.opts.Routes = b.nats.opts.Routes[:2] }, "0 routes to ordinal 2"},
		{"route duplicated", func(b *bundle) { b.nats.opts.Routes[2] = b.nats.opts.Routes[1] }, "2 routes to ordinal 1"},
		{"route to wrong port", func(b *bundle) {
			u := *b.nats.opts.Routes[0]
			u.Host = u.Hostname() + ":4222"
			b.nats.opts.Routes[0] = &u
		}, "the cluster port is 6222"},
		{"route through wrong service", func(b *bundle) { b.natsStatefulSet().Spec.ServiceName = "nats" }, "names no pod"},
		{"not publishNotReadyAddresses", func(b *bundle) { b.service("nats-headless").Spec.PublishNotReadyAddresses = false }, "publishNotReadyAddresses"},
		{"ordered pod management", func(b *bundle) { b.natsStatefulSet().Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement }, "Parallel"},
		{"server_name fixed", func(b *bundle) { b.nats.serverNameFollowsPod = false }, "does not follow $POD_NAME"},
		{"POD_NAME not from the pod", func(b *bundle) { envVar(*natsC(b), "POD_NAME").ValueFrom = nil }, "fieldRef metadata.name"},
		{"password variable not set", func(b *bundle) {
			c := natsC(b)
			c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SESSIONLOG_AGENT_PASSWORD" })
		}, "$SESSIONLOG_AGENT_PASSWORD"},
		{"pdb selector", func(b *bundle) {
			for _, d := range b.pdbs {
				if d.Name == natsName {
					d.Spec.Selector.MatchLabels["app.kubernetes.io/name"] = "natz"
				}
			}
		}, "0 PodDisruptionBudgets select the NATS pods"},
		{"pdb too loose", func(b *bundle) {
			for _, d := range b.pdbs {
				if d.Name == natsName {
					two := intstr.FromInt32(2)
					d.Spec.MaxUnavailable = &two
				}
			}
		}, "want maxUnavailable: 1"},
		{"probe port", func(b *bundle) { writerC(b).ReadinessProbe.HTTPGet.Port = intstr.FromString("metrics") }, "readiness probe port metrics is not a port"},
		{"probe missing", func(b *bundle) { writerC(b).LivenessProbe = nil }, "needs both a liveness and a readiness probe"},
		{"nats probe path", func(b *bundle) { natsC(b).LivenessProbe.HTTPGet.Path = "/healthz" }, "liveness probe path"},
		{"nats probe port", func(b *bundle) { natsC(b).StartupProbe.HTTPGet.Port = intstr.FromString("client") }, "startup probe is not on the monitoring port"},
		{"image latest", func(b *bundle) { writerC(b).Image = "sessionlog:latest" }, "uses :latest"},
		{"image untagged", func(b *bundle) { natsC(b).Image = "nats" }, "has no tag"},
		{"different images", func(b *bundle) { writerC(b).Image = "sessionlog:0.2.0" }, "different images"},
		{"no limits", func(b *bundle) { projC(b).Resources.Limits = nil }, "no memory limit"},
		{"request over limit", func(b *bundle) { writerC(b).Resources.Requests[corev1.ResourceCPU] = resource.MustParse("4") }, "above limit"},
		{"configmap missing", func(b *bundle) { writerC(b).EnvFrom[0].ConfigMapRef.Name = "sessionlog-envs" }, `ConfigMap "sessionlog-envs" does not exist`},
		{"secret key missing", func(b *bundle) {
			envVar(*projC(b), "SESSIONLOG_HTTP_TOKEN").ValueFrom.SecretKeyRef.Key = "tokn"
		}, `has no key "tokn"`},
		{"secret missing", func(b *bundle) { b.exampleSecrets = b.exampleSecrets[1:] }, `Secret "sessionlog-nats-auth" does not exist`},
		{"writable root", func(b *bundle) { writerC(b).SecurityContext.ReadOnlyRootFilesystem = &f }, "not read-only"},
		{"root user", func(b *bundle) { dep(b, "forker").Spec.Template.Spec.SecurityContext.RunAsNonRoot = &f }, "not runAsNonRoot"},
		{"service links", func(b *bundle) { dep(b, "repairer").Spec.Template.Spec.EnableServiceLinks = &tr }, "enableServiceLinks"},
		{"anti-affinity selects others", func(b *bundle) {
			b.natsStatefulSet().Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels["app.kubernetes.io/name"] = "x"
		}, "nothing forces its replicas onto different nodes"},
		{"cluster port open", func(b *bundle) {
			for _, np := range b.netpols {
				for i := range np.Spec.Ingress {
					np.Spec.Ingress[i].From = nil
				}
			}
		}, "cluster port 6222 is open to more than the NATS pods"},
		{"netpol port", func(b *bundle) {
			cl := intstr.FromString("routes")
			b.netpols[0].Spec.Ingress[1].Ports[0].Port = &cl
		}, "port routes is not a container port"},
		{"config not mounted", func(b *bundle) { natsC(b).Command[2] = "/etc/nats-server/nats.conf" }, "is not nats.conf in the mounted ConfigMap"},
		{"include not packed", func(b *bundle) {
			for i := range b.kust.ConfigMapGenerator {
				if b.kust.ConfigMapGenerator[i].Name == natsConfigMap {
					b.kust.ConfigMapGenerator[i].Files = slices.DeleteFunc(b.kust.ConfigMapGenerator[i].Files, func(f string) bool { return f == "auth.conf" })
				}
			}
		}, "includes auth.conf, which ConfigMap nats-config does not hold"},
		{"pid file not writable", func(b *bundle) { b.nats.opts.PidFile = "/var/run/nats.pid" }, "not on a writable emptyDir"},
		{"no lame duck", func(b *bundle) { natsC(b).Lifecycle = nil }, "lame duck mode"},
		{"grace too short", func(b *bundle) {
			g := int64(20)
			b.natsStatefulSet().Spec.Template.Spec.TerminationGracePeriodSeconds = &g
		}, "does not fit"},
		{"wrong subcommand", func(b *bundle) { dep(b, "repairer").Spec.Template.Spec.Containers[0].Args[0] = "writer" }, `runs subcommand "writer"`},
		{"nats url host", func(b *bundle) { setArg(writerC(b), natsURLFlag, "nats://nats-client:4222") }, "is not a Service here"},
		{"nats url port", func(b *bundle) { setArg(writerC(b), natsURLFlag, "nats://nats:4223") }, "has no port 4223"},
		{"nats url to projector", func(b *bundle) { setArg(writerC(b), natsURLFlag, "nats://projector:8080") }, "does not lead to the NATS pods"},
		{"http listen port", func(b *bundle) { setArg(projC(b), httpListenFlag, "0.0.0.0:9090") }, "listens on 9090"},
		{"http listen loopback", func(b *bundle) { setArg(projC(b), httpListenFlag, "127.0.0.1:8080") }, "want 0.0.0.0"},
		{"data dir off the claim", func(b *bundle) { setArg(projC(b), dataDirFlag, "/data") }, "is not the mount of a volume claim"},
		{"service password mismatch", func(b *bundle) {
			envVar(*writerC(b), natsPasswordEnv).ValueFrom.SecretKeyRef.Key = "agent-password"
		}, "the NATS server reads the service password from"},
		{"wrong nats user", func(b *bundle) { b.exampleSecrets[0].StringData["service-user"] = "agent" }, `resolves to "agent"`},
		{"literal password", func(b *bundle) {
			e := envVar(*writerC(b), natsPasswordEnv)
			e.ValueFrom, e.Value = nil, "hunter2"
		}, "must come from a Secret"},
		{"component missing", func(b *bundle) {
			b.deployments = slices.DeleteFunc(b.deployments, func(d *appsv1.Deployment) bool { return d.Name == "forker" })
		}, "no workload runs the forker"},
		{"writer replicas", func(b *bundle) { one := int32(1); dep(b, "writer").Spec.Replicas = &one }, "want 2..2"},
		{"non-flag env literal", func(b *bundle) {
			b.kust.ConfigMapGenerator[1].Literals = append(b.kust.ConfigMapGenerator[1].Literals, "LEASE_TTL=1s")
		}, "LEASE_TTL is not a SESSIONLOG_ flag"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := loadBundle(t)
			if ps := runChecks(b); len(ps) > 0 {
				t.Fatalf("clean manifests already fail: %v", ps)
			}
			tc.break_(b)
			ps := runChecks(b)
			for _, p := range ps {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("no problem mentions %q; got %q", tc.want, ps)
		})
	}
}
