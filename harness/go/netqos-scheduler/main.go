// netqos-scheduler is kube-scheduler with the NetQoS score plugin registered out of tree, as the
// NetQoS scheduler plugin's own experiment built it (app.WithPlugin). Which profiles use the
// plugin is up to the scheduler configuration: scripts/cluster runs it with the default profile
// and a second profile "netqos-scheduler" (the default plugins plus NetQoS at weight 1).
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"netqos-webhook/tests/e2e/netqos-scheduler/netqos"
)

func main() {
	command := app.NewSchedulerCommand(app.WithPlugin(netqos.Name, netqos.New))
	os.Exit(cli.Run(command))
}
