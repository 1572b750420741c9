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
		port.Port, port.NodePort = int32(in.Port), 0
		if found && len(svc.Spec.Ports) == 1 {
			port.NodePort = svc.Spec.Ports[0].NodePort // kept: not reallocated by an update
		}
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
	if found {
		svc, err = api.Update(ctx, svc, metav1.UpdateOptions{})
	} else {
		svc, err = api.Create(ctx, svc, metav1.CreateOptions{})
	}
	if err != nil {
		if apierrors.IsInvalid(err) && typ == corev1.ServiceTypeNodePort {
			return nil, fmt.Errorf("database %d: its port %d must be a free NodePort of the cluster (its range is 30000-32767 by default: give clouddb a --db-ports range within it): %w", in.DatabaseID, in.Port, err)
		}
		return nil, fmt.Errorf("database %d: writing its service: %w", in.DatabaseID, err)
	}
	return svc, nil
}
