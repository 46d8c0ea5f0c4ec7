package kube

import (
	"net"
	"path"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluicehq/sluice/config"
)

// Drain is how long `sluice serve` takes at most to stop after SIGTERM
// (docs/serve.md, Stopping): the grace period must cover it.
const Drain = 10

// Expect is what a set of manifests should deploy. The zero value expects
// a Deployment, ConfigMap and Service with empty names, which never match.
type Expect struct {
	Deployment, ConfigMap, Service string // their names
	// RedisSecret is the Secret whose key url is REDIS_URL; empty: the
	// memory store, and no REDIS_URL.
	RedisSecret string
	// Redis: a Redis runs beside Sluice, and the Secret's URL names its Service.
	Redis bool
	// PDB, HPA, ServiceMonitor: each is present, and points at Sluice.
	PDB, HPA, ServiceMonitor bool
}

// set indexes decoded objects by kind and name.
type set map[string]Object

// CheckRelease checks that objs deploy Sluice as e expects, and as
// docs/deploy.md says: probes on /healthcheck, a locked-down container, a
// config mounted as a directory where RUNTIME_ROOT points (so a ConfigMap
// update reloads), a grace period covering the preStop sleep and the drain,
// and a config that loads.
func CheckRelease(t testing.TB, objs []Object, e Expect) {
	t.Helper()
	s := set{}
	for _, o := range objs {
		if _, dup := s[Name(o)]; dup {
			t.Errorf("%s is defined twice", Name(o))
		}
		s[Name(o)] = o
	}
	d, ok := s["Deployment/"+e.Deployment].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("no Deployment %q among %v", e.Deployment, s.names())
	}
	pod := d.Spec.Template
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err != nil || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the Deployment's selector %v does not select its pods' labels %v", d.Spec.Selector, pod.Labels)
	}
	c := container(t, pod.Spec, "sluice")
	checkPorts(t, c)
	checkProbes(t, c)
	checkSecurity(t, pod.Spec, c)
	checkShutdown(t, pod.Spec, c)
	checkSpread(t, pod)
	checkConfig(t, s, pod.Spec, c, e.ConfigMap)
	checkRedis(t, s, c, e)
	checkService(t, s, pod, e.Service)
	checkExtras(t, s, d, e)
}

// names lists the objects of s.
func (s set) names() []string {
	var n []string
	for k := range s {
		n = append(n, k)
	}
	return n
}

// selected returns the one Service whose labels sel selects, or "" when
// none or several are.
func (s set) selected(sel labels.Selector) string {
	found := ""
	for name, o := range s {
		if svc, ok := o.(*corev1.Service); ok && sel.Matches(labels.Set(svc.Labels)) {
			if found != "" {
				return ""
			}
			found = name
		}
	}
	return found
}

// container returns the container called name.
func container(t testing.TB, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q in the pod", name)
	return corev1.Container{}
}

// env returns the variable name of c, and whether it is set.
func env(c corev1.Container, name string) (corev1.EnvVar, bool) {
	for _, v := range c.Env {
		if v.Name == name {
			return v, true
		}
	}
	return corev1.EnvVar{}, false
}

// checkPorts: HTTP on 8080 and gRPC on 8081, named.
func checkPorts(t testing.TB, c corev1.Container) {
	t.Helper()
	want := map[string]int32{"http": 8080, "grpc": 8081}
	for _, p := range c.Ports {
		if want[p.Name] == p.ContainerPort {
			delete(want, p.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("the container's ports %v lack %v", c.Ports, want)
	}
}

// checkProbes: readiness and liveness ask GET /healthcheck on the http port.
func checkProbes(t testing.TB, c corev1.Container) {
	t.Helper()
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthcheck" || p.HTTPGet.Port.String() != "http" {
			t.Errorf("the %s probe is %+v, want GET /healthcheck on port http", name, p)
		}
	}
}

// checkSecurity: non-root, no privilege escalation, read-only root, no capabilities.
func checkSecurity(t testing.TB, spec corev1.PodSpec, c corev1.Container) {
	t.Helper()
	ps := spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Error("the pod does not set runAsNonRoot: true")
	}
	cs := c.SecurityContext
	switch {
	case cs == nil:
		t.Fatal("the container has no securityContext")
	case cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation:
		t.Error("the container does not set allowPrivilegeEscalation: false")
	case cs.ReadOnlyRootFilesystem == nil || !*cs.ReadOnlyRootFilesystem:
		t.Error("the container does not set readOnlyRootFilesystem: true")
	case cs.Capabilities == nil || len(cs.Capabilities.Drop) != 1 || cs.Capabilities.Drop[0] != "ALL":
		t.Error("the container does not drop ALL capabilities")
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("the container's resources %+v lack a CPU request or a memory limit", c.Resources)
	}
}

// checkShutdown: the pod stays in the endpoints for the preStop sleep, and
// the grace period covers the sleep, the drain and a second to exit.
func checkShutdown(t testing.TB, spec corev1.PodSpec, c corev1.Container) {
	t.Helper()
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Fatal("no preStop sleep: SIGTERM would close the listeners while the Service still sends to the pod")
	}
	sleep := c.Lifecycle.PreStop.Sleep.Seconds
	grace := int64(30) // Kubernetes' default
	if spec.TerminationGracePeriodSeconds != nil {
		grace = *spec.TerminationGracePeriodSeconds
	}
	if sleep < 1 || grace < sleep+Drain+1 {
		t.Errorf("preStop sleeps %d s and the grace period is %d s: want a sleep and a grace of at least sleep + %d s drain + 1 s", sleep, grace, Drain)
	}
}

// checkSpread: replicas are spread over nodes, by the pods' own labels.
func checkSpread(t testing.TB, pod corev1.PodTemplateSpec) {
	t.Helper()
	for _, tsc := range pod.Spec.TopologySpreadConstraints {
		sel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
		if err == nil && tsc.TopologyKey == "kubernetes.io/hostname" && sel.Matches(labels.Set(pod.Labels)) && !sel.Empty() {
			return
		}
	}
	t.Errorf("no topology spread over kubernetes.io/hostname selecting the pods: %+v", pod.Spec.TopologySpreadConstraints)
}

// checkConfig: the ConfigMap is mounted whole (not by subPath, whose files
// never update) at RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config, and its
// files load as Sluice configs.
func checkConfig(t testing.TB, s set, spec corev1.PodSpec, c corev1.Container, name string) {
	t.Helper()
	root, _ := env(c, "RUNTIME_ROOT")
	sub, _ := env(c, "RUNTIME_SUBDIRECTORY")
	dir := path.Join(root.Value, sub.Value, "config")
	if root.Value == "" {
		t.Fatal("RUNTIME_ROOT is not set: serve would use its built-in example")
	}
	vol := ""
	for _, m := range c.VolumeMounts {
		if m.MountPath == dir {
			vol = m.Name
			if m.SubPath != "" || m.SubPathExpr != "" {
				t.Errorf("the config is mounted with a subPath: its file never changes on a ConfigMap update")
			}
		}
	}
	var cm string
	for _, v := range spec.Volumes {
		if v.Name == vol && v.ConfigMap != nil {
			cm = v.ConfigMap.Name
		}
	}
	if vol == "" || cm != name {
		t.Fatalf("nothing mounts ConfigMap %q at %s (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config)", name, dir)
	}
	m, ok := s["ConfigMap/"+name].(*corev1.ConfigMap)
	if !ok || len(m.Data) == 0 {
		t.Fatalf("no ConfigMap %q with data", name)
	}
	for file, text := range m.Data {
		if !strings.HasSuffix(file, ".yaml") && !strings.HasSuffix(file, ".yml") {
			t.Errorf("ConfigMap %s: %s is not a *.yaml file, so serve would not read it", name, file)
			continue
		}
		d, err := config.Parse(file, []byte(text))
		if err == nil {
			_, err = config.New(d)
		}
		if err != nil {
			t.Errorf("ConfigMap %s: %s does not load: %v", name, file, err)
		}
	}
}

// checkRedis: REDIS_URL comes from the Secret's key url; with a Redis in
// the release, that URL names its Service and port.
func checkRedis(t testing.TB, s set, c corev1.Container, e Expect) {
	t.Helper()
	v, ok := env(c, "REDIS_URL")
	if e.RedisSecret == "" {
		if ok {
			t.Errorf("REDIS_URL is set (%+v) with no Redis", v)
		}
		return
	}
	if !ok || v.ValueFrom == nil || v.ValueFrom.SecretKeyRef == nil ||
		v.ValueFrom.SecretKeyRef.Name != e.RedisSecret || v.ValueFrom.SecretKeyRef.Key != "url" {
		t.Fatalf("REDIS_URL is %+v, want the key url of Secret %s", v, e.RedisSecret)
	}
	if !e.Redis {
		return
	}
	sec, ok := s["Secret/"+e.RedisSecret].(*corev1.Secret)
	if !ok {
		t.Fatalf("no Secret %s", e.RedisSecret)
	}
	url := sec.StringData["url"]
	if url == "" {
		url = string(sec.Data["url"])
	}
	host, port, err := net.SplitHostPort(strings.TrimPrefix(url, "redis://"))
	if err != nil {
		t.Fatalf("Secret %s: url %q: %v", e.RedisSecret, url, err)
	}
	svc, ok := s["Service/"+host].(*corev1.Service)
	if !ok || len(svc.Spec.Ports) == 0 || port != "6379" || svc.Spec.Ports[0].Port != 6379 {
		t.Errorf("the Redis URL %q names no Service with port 6379 (have %v)", url, s.names())
	}
}

// checkService: the Service selects the pods and carries http and grpc.
func checkService(t testing.TB, s set, pod corev1.PodTemplateSpec, name string) {
	t.Helper()
	svc, ok := s["Service/"+name].(*corev1.Service)
	if !ok {
		t.Fatalf("no Service %s", name)
	}
	if sel := labels.SelectorFromSet(svc.Spec.Selector); svc.Spec.Selector == nil || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("Service %s selects %v, not the pods %v", name, svc.Spec.Selector, pod.Labels)
	}
	want := map[string]bool{"http": true, "grpc": true}
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.String() == p.Name {
			delete(want, p.Name)
		}
	}
	if len(want) > 0 {
		t.Errorf("Service %s lacks the ports %v (targeting the container's named ports)", name, want)
	}
}

// checkExtras: the PDB, HPA and ServiceMonitor, when expected, point at Sluice.
func checkExtras(t testing.TB, s set, d *appsv1.Deployment, e Expect) {
	t.Helper()
	pods := labels.Set(d.Spec.Template.Labels)
	var pdb, hpa, sm bool
	for _, o := range s {
		switch o := o.(type) {
		case *policyv1.PodDisruptionBudget:
			sel, err := metav1.LabelSelectorAsSelector(o.Spec.Selector)
			pdb = err == nil && sel.Matches(pods)
		case *autoscalingv2.HorizontalPodAutoscaler:
			hpa = o.Spec.ScaleTargetRef.Kind == "Deployment" && o.Spec.ScaleTargetRef.Name == d.Name
		case *monitoringv1.ServiceMonitor:
			sel, err := metav1.LabelSelectorAsSelector(&o.Spec.Selector)
			sm = err == nil && s.selected(sel) == "Service/"+e.Service &&
				len(o.Spec.Endpoints) == 1 && o.Spec.Endpoints[0].Port == "http" && o.Spec.Endpoints[0].Path == "/metrics"
		}
	}
	for what, got := range map[string][2]bool{"PodDisruptionBudget": {e.PDB, pdb}, "HorizontalPodAutoscaler": {e.HPA, hpa}, "ServiceMonitor": {e.ServiceMonitor, sm}} {
		if got[0] != got[1] {
			t.Errorf("%s: expected %v, found one pointing at Sluice: %v", what, got[0], got[1])
		}
	}
}
