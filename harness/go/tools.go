//go:build tools

// The control-plane and node commands scripts/cluster builds from this module (go build k8s.io/kubernetes/cmd/...),
// imported here so that go.mod and go.sum pin everything they need.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
