// etcd, built from go.etcd.io/etcd/server/v3 for the end-to-end control plane (scripts/cluster).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
