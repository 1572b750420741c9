package kubernetes

import (
	"context"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"clouddb"
)

// applyService creates or updates the database's Service, to the pods' redis port: with
// NodePort Services (Config.ServiceType) the database's port on every node; with
// LoadBalancer ones the database's port on the load balancer's address (and a NodePort
// of Kubernetes' choosing, which load balancers may route through). It selects the
// primary pod only when primaryOnly is true (see serviceSelector), every pod when false,
// and when nil as it is (a new Service: as the instance wants), since only Ensure's
// choice of the primary moves it.
func (d *Driver) applyService(ctx context.Context, in clouddb.Instance, sts *appsv1.StatefulSet, primaryOnly *bool) (*corev1.Service, error) {
	api := d.cfg.Client.CoreV1().Services(d.ns)
	svc, err := api.Get(ctx, Name(in.DatabaseID), metav1.GetOptions{})
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("database %d: reading its service: %w", in.DatabaseID, err)
	}
	sel := serviceSelector(in.DatabaseID, in.Replication)
	switch {
	case primaryOnly != nil:
		sel = serviceSelector(in.DatabaseID, *primaryOnly)
	case found:
		sel = serviceSelector(in.DatabaseID, svc.Spec.Selector[LabelRole] != "")
	}
	typ := d.serviceType()
	port := corev1.ServicePort{Name: "redis", Protocol: corev1.ProtocolTCP, Port: redisPort, TargetPort: intstr.FromInt32(redisPort), NodePort: int32(in.Port)}
	if typ == corev1.ServiceTypeLoadBalancer {
		port.Port, port.NodePort = int32(in.Port), lbNodePort(in, svc)
	}
	if found {
		if svc.Spec.Type == typ && len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].Port == port.Port && svc.Spec.Ports[0].NodePort == port.NodePort &&
			maps.Equal(svc.Spec.Selector, sel) && len(svc.OwnerReferences) == 1 && svc.OwnerReferences[0].UID == sts.UID {
			return svc, nil
		}
	} else {
		svc = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: Name(in.DatabaseID), Namespace: d.ns}}
	}
	svc.Labels, svc.OwnerReferences = labels(in.DatabaseID), ownedBy(sts)
	svc.Spec.Type = typ
	svc.Spec.Selector = sel
	svc.Spec.Ports = []corev1.ServicePort{port}
	write := func() (*corev1.Service, error) {
		if found {
			return api.Update(ctx, svc, metav1.UpdateOptions{})
		}
		return api.Create(ctx, svc, metav1.CreateOptions{})
	}
	want := svc.DeepCopy()
	svc, err = write()
	if err != nil && apierrors.IsInvalid(err) && typ == corev1.ServiceTypeLoadBalancer && want.Spec.Ports[0].NodePort != 0 {
		// The database's port is not a NodePort the cluster can give (outside its range,
		// or taken outside clouddb): Kubernetes' choice.
		svc = want
		svc.Spec.Ports[0].NodePort = 0
		svc, err = write()
	}
	if err != nil {
		if apierrors.IsInvalid(err) && typ == corev1.ServiceTypeNodePort {
			return nil, fmt.Errorf("database %d: its port %d must be a free NodePort of the cluster (its range is 30000-32767 by default: give clouddb a --db-ports range within it): %w", in.DatabaseID, in.Port, err)
		}
		return nil, fmt.Errorf("database %d: writing its service: %w", in.DatabaseID, err)
	}
	return svc, nil
}

// lbNodePort is the NodePort a database's LoadBalancer Service asks for: the one it has
// (not reallocated by an update), or for a new one the database's port, which clouddb
// gives no other database, so that no NodePort Kubernetes would choose at random is one a
// database's Service asks for later. The caller falls back to Kubernetes' choice when the
// cluster cannot give that port (outside its range, taken by another namespace).
func lbNodePort(in clouddb.Instance, svc *corev1.Service) int32 {
	if svc != nil && len(svc.Spec.Ports) == 1 && svc.Spec.Ports[0].NodePort != 0 {
		return svc.Spec.Ports[0].NodePort
	}
	return int32(in.Port)
}
