// Package netqos is a port of the NetQoS scheduler plugin to the scheduling framework of
// Kubernetes 1.34 to 1.37: a Score plugin (a soft constraint, no Filter) that prefers fast-network nodes
// for pods labelled qos=latency-sensitive.
//
// Its scores are the plugin's stated intent (docs/scheduling.md): for a latency-sensitive pod,
// net=high 100, net=low 0, any other value or no label 10; every other pod 0 on every node. The
// original set 100 for net=high whatever the pod (a missing return); that is not reproduced.
// Like the original it has no NormalizeScore: its scores are absolute.
//
// The framework's interfaces moved between releases (framework_*.go name them for each): this
// file compiles against all four.
package netqos

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"
)

// Name is the plugin's name in a scheduler profile.
const Name = "NetQoS"

const (
	podLabel       = "qos"
	latencyValue   = "latency-sensitive"
	nodeLabel      = "net"
	highValue      = "high"
	lowValue       = "low"
	otherNodeScore = 10
)

// NetQoS scores nodes by their net label for latency-sensitive pods.
type NetQoS struct{}

var _ scorePlugin = &NetQoS{}

// New builds the plugin; it takes no arguments.
func New(_ context.Context, _ runtime.Object, _ handle) (plugin, error) {
	return &NetQoS{}, nil
}

// Name is the plugin's name.
func (pl *NetQoS) Name() string { return Name }

// Score is NodeScore(pod, node): the node comes from the cycle's snapshot, as it did in the
// original (which looked it up by name in SnapshotSharedLister).
func (pl *NetQoS) Score(_ context.Context, _ fwk.CycleState, pod *v1.Pod, nodeInfo fwk.NodeInfo) (int64, *fwk.Status) {
	node := nodeInfo.Node()
	if node == nil {
		return 0, fwk.NewStatus(fwk.Error, "node not found in the snapshot")
	}
	return NodeScore(pod.Labels, node.Labels), nil
}

// NodeScore is the plugin's table: pod labels and node labels in, a score from 0 to 100 out.
func NodeScore(podLabels, nodeLabels map[string]string) int64 {
	if podLabels[podLabel] != latencyValue {
		return 0
	}
	switch nodeLabels[nodeLabel] {
	case highValue:
		return maxNodeScore
	case lowValue:
		return 0
	default:
		return otherNodeScore
	}
}

// ScoreExtensions is nil: the scores are absolute, as the original's were.
func (pl *NetQoS) ScoreExtensions() scoreExtensions { return nil }
