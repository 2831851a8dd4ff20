//go:build !kubernetes_1_34

package netqos

import fwk "k8s.io/kube-scheduler/framework"

// From Kubernetes 1.35 the plugin interfaces live in the staging module k8s.io/kube-scheduler
// (staging/src/k8s.io/kube-scheduler/framework/interface.go at v1.35.4, v1.36.3, v1.37.2).
type (
	scorePlugin     = fwk.ScorePlugin
	scoreExtensions = fwk.ScoreExtensions
	plugin          = fwk.Plugin
	handle          = fwk.Handle
)

const maxNodeScore = fwk.MaxNodeScore
