package kubernetes

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLostBehindOld: a missing pod counts as lost (one the StatefulSet's controller does
// not make) only past the lowest pod that has no claim; pods beyond the StatefulSet's
// count do not count.
func TestLostBehindOld(t *testing.T) {
	const id = 7
	pod := func(ordinal int, claim bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: nodePodName(id, ordinal)}}
		v := corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
		if claim {
			v.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + p.Name}}
		}
		p.Spec.Volumes = []corev1.Volume{v}
		return p
	}
	for _, c := range []struct {
		name string
		pods []corev1.Pod
		want int
		lost []int
	}{
		{"every pod there", []corev1.Pod{pod(0, true), pod(1, false), pod(2, false), pod(3, false)}, 4, nil},
		{"lost behind an old pod", []corev1.Pod{pod(0, true), pod(1, false), pod(2, false)}, 4, []int{3}},
		{"the lowest old pod missing: the controller makes it", []corev1.Pod{pod(0, true), pod(2, false), pod(3, false)}, 4, nil},
		{"missing before the lowest old pod", []corev1.Pod{pod(1, false), pod(2, false), pod(3, false)}, 4, nil},
		{"missing both before and past the lowest old pod: the one before first", []corev1.Pod{pod(1, false), pod(2, false)}, 4, nil},
		{"every pod on a claim", []corev1.Pod{pod(0, true), pod(2, true)}, 4, nil},
		{"several lost", []corev1.Pod{pod(0, false)}, 4, []int{1, 2, 3}},
		{"a pod past the count", []corev1.Pod{pod(0, true), pod(1, true), pod(2, false)}, 2, nil},
	} {
		if got := lostBehindOld(c.pods, id, c.want); !slices.Equal(got, c.lost) {
			t.Errorf("%s: lost %v, want %v", c.name, got, c.lost)
		}
	}
}
