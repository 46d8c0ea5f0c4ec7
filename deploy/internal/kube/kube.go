// Package kube decodes Kubernetes manifests strictly into the API's Go
// types, for the tests of deploy/kubernetes and the Helm chart: a field the
// type does not have, a wrong type or a duplicate key is an error, as
// `kubectl apply --validate=strict` would report.
package kube

import (
	"bytes"
	"fmt"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Object is a decoded manifest: one of the pointer types of kinds.
type Object any

// kinds are the API versions and kinds the manifests may hold, each with a
// constructor of its Go type.
var kinds = map[string]func() Object{
	"v1/ConfigMap":                            func() Object { return new(corev1.ConfigMap) },
	"v1/Secret":                               func() Object { return new(corev1.Secret) },
	"v1/Service":                              func() Object { return new(corev1.Service) },
	"v1/ServiceAccount":                       func() Object { return new(corev1.ServiceAccount) },
	"apps/v1/Deployment":                      func() Object { return new(appsv1.Deployment) },
	"policy/v1/PodDisruptionBudget":           func() Object { return new(policyv1.PodDisruptionBudget) },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() Object { return new(autoscalingv2.HorizontalPodAutoscaler) },
	"monitoring.coreos.com/v1/ServiceMonitor": func() Object { return new(monitoringv1.ServiceMonitor) },
}

// Decode splits data into its YAML documents and decodes each non-empty one
// strictly into the type of its apiVersion and kind. An unknown kind, an
// unknown field or a document without a name is an error naming the
// document (where, then its index from 0).
func Decode(where string, data []byte) ([]Object, error) {
	var out []Object
	for i, doc := range splitDocs(data) {
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", where, i, err)
		}
		mk, ok := kinds[tm.APIVersion+"/"+tm.Kind]
		if !ok {
			return nil, fmt.Errorf("%s: document %d: unknown kind %s %s", where, i, tm.APIVersion, tm.Kind)
		}
		obj := mk()
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: document %d (%s): %w", where, i, tm.Kind, err)
		}
		if meta(obj).Name == "" {
			return nil, fmt.Errorf("%s: document %d (%s): no metadata.name", where, i, tm.Kind)
		}
		out = append(out, obj)
	}
	return out, nil
}

// meta returns obj's object metadata.
func meta(obj Object) *metav1.ObjectMeta {
	return obj.(interface{ GetObjectMeta() metav1.Object }).GetObjectMeta().(*metav1.ObjectMeta)
}

// Name returns obj's kind and name, as "Deployment/sluice".
func Name(obj Object) string {
	kind := strings.TrimPrefix(fmt.Sprintf("%T", obj), "*")
	kind = kind[strings.LastIndex(kind, ".")+1:]
	return kind + "/" + meta(obj).Name
}

// splitDocs cuts a YAML stream at its "---" lines.
func splitDocs(data []byte) [][]byte {
	var docs [][]byte
	var cur []byte
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if t := bytes.TrimRight(line, " \r\n"); bytes.Equal(t, []byte("---")) {
			docs = append(docs, cur)
			cur = nil
			continue
		}
		cur = append(cur, line...)
	}
	return append(docs, cur)
}

// stripComments drops the whole-line comments of a document.
func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line...)
		}
	}
	return out
}
