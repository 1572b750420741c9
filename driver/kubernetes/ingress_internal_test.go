package kubernetes

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"clouddb"
)

// TestIngressOf: of a load balancer's addresses, the one given out and announced is an
// IPv4 address, else a hostname, else an IPv6 address, whatever their order.
func TestIngressOf(t *testing.T) {
	for _, c := range []struct {
		name    string
		ingress []corev1.LoadBalancerIngress
		want    string
	}{
		{"none", nil, ""},
		{"IPv6 before IPv4", []corev1.LoadBalancerIngress{{IP: "2001:db8::7"}, {IP: "192.0.2.7"}}, "192.0.2.7"},
		{"IPv6 before a hostname", []corev1.LoadBalancerIngress{{IP: "2001:db8::7"}, {Hostname: "lb.example"}}, "lb.example"},
		{"a hostname before IPv4", []corev1.LoadBalancerIngress{{Hostname: "lb.example"}, {IP: "192.0.2.7"}}, "192.0.2.7"},
		{"IPv6 only", []corev1.LoadBalancerIngress{{IP: "2001:db8::7"}}, "2001:db8::7"},
	} {
		svc := &corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: c.ingress}}}
		got, ok := ingressOf(svc)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s: ingressOf = %q, %v; want %q", c.name, got, ok, c.want)
		}
	}
}

// TestLoadBalancerNodePort: a database's new LoadBalancer Service asks for the database's
// port as its NodePort; when the cluster cannot give that one (here: refused as Invalid,
// as a port outside its range is), the Service is made with Kubernetes' choice.
func TestLoadBalancerNodePort(t *testing.T) {
	ctx := context.Background()
	for _, refuse := range []bool{false, true} {
		client := fake.NewClientset()
		var asked []int32
		client.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
			svc := a.(k8stesting.CreateAction).GetObject().(*corev1.Service)
			asked = append(asked, svc.Spec.Ports[0].NodePort)
			if refuse && svc.Spec.Ports[0].NodePort != 0 {
				return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, svc.Name,
					field.ErrorList{field.Invalid(field.NewPath("spec", "ports").Index(0).Child("nodePort"), svc.Spec.Ports[0].NodePort, "provided port is not in the valid range")})
			}
			return false, nil, nil
		})
		d, err := New(Config{Client: client, Namespace: "ns", Images: map[string]string{"7.0": "redis"}, DefaultVersion: "7.0",
			ServiceType: corev1.ServiceTypeLoadBalancer})
		if err != nil {
			t.Fatal(err)
		}
		in := clouddb.Instance{DatabaseID: 9, Port: 12000}
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: Name(9), Namespace: "ns", UID: "u"}}
		svc, err := d.applyService(ctx, in, sts, ptr(false))
		if err != nil {
			t.Fatalf("refused %v: applyService: %v", refuse, err)
		}
		want := []int32{12000}
		if refuse {
			want = []int32{12000, 0}
		}
		if len(asked) != len(want) || asked[0] != want[0] || len(want) == 2 && asked[1] != 0 {
			t.Fatalf("refused %v: NodePorts asked %v, want %v", refuse, asked, want)
		}
		if p := svc.Spec.Ports[0]; p.Port != 12000 || svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			t.Fatalf("refused %v: service %s %+v, want a LoadBalancer on port 12000", refuse, svc.Spec.Type, p)
		}
	}
}
