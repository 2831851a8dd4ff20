//go:build kubernetes_1_34

package netqos

import framework "k8s.io/kubernetes/pkg/scheduler/framework"

// In Kubernetes 1.34 only CycleState, NodeInfo and Status had moved to k8s.io/kube-scheduler; the
// plugin interfaces were still in pkg/scheduler/framework/interface.go (v1.34.4). scripts/cluster
// builds 1.34 with -tags kubernetes_1_34.
type (
	scorePlugin     = framework.ScorePlugin
	scoreExtensions = framework.ScoreExtensions
	plugin          = framework.Plugin
	handle          = framework.Handle
)

const maxNodeScore = framework.MaxNodeScore
