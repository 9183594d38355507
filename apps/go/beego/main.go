// Beego (v2) with the same endpoints as every other stack.
//
//	bin/server -addr 127.0.0.1:8080
//
// RunMode is prod and access logs are off (here and in conf/app.conf, which Beego reads
// from the working directory and warns about when it is missing). /io waits with
// time.Sleep, which parks only the goroutine; /db queries MariaDB through database/sql
// (apps/go/dbquery).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"stackrace/apps/go/dbquery"

	"github.com/beego/beego/v2/server/web"
	"github.com/beego/beego/v2/server/web/context"
)

const (
	ioDefaultMs = 10
	ioMaxMs     = 10000 // a typo in a URL must not park a handler for hours
)

func hello(ctx *context.Context) {
	ctx.Output.Header("Content-Type", "text/plain")
	ctx.Output.Body([]byte("Hello, World!"))
}

func jsonHandler(ctx *context.Context) {
	// encoding/json writes compact JSON; the object is put together around the encoded
	// value so every stack sends the contract's exact bytes: {"message": "Hello, World!"}
	value, err := json.Marshal("Hello, World!")
	if err != nil {
		ctx.Abort(500, err.Error())
		return
	}
	body := make([]byte, 0, 32)
	body = append(body, `{"message": `...)
	body = append(body, value...)
	body = append(body, '}')
	ctx.Output.Header("Content-Type", "application/json")
	ctx.Output.Body(body)
}

func io(ctx *context.Context) {
	ms := ioDefaultMs
	if v, err := strconv.Atoi(ctx.Input.Query("ms")); err == nil && v >= 0 {
		ms = min(v, ioMaxMs)
	}
	time.Sleep(time.Duration(ms) * time.Millisecond)
	ctx.Output.Header("Content-Type", "text/plain")
	ctx.Output.Body([]byte("ok"))
}

func dbHandler(ctx *context.Context) {
	status, body := dbquery.Response(dbquery.ParseQueries(ctx.Input.Query("queries")))
	ctx.Output.Header("Content-Type", "text/plain")
	ctx.Output.SetStatus(status)
	ctx.Output.Body(body)
}

func beegoVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "github.com/beego/beego/v2" {
				return dep.Version
			}
		}
	}
	return "unknown"
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	version := flag.Bool("version", false, "print the Beego and Go versions and exit")
	flag.Parse()
	if *version {
		// beego.VERSION is not kept up to date; the module version in the build info is
		fmt.Println("beego", beegoVersion(), runtime.Version())
		return
	}
	host, portText, err := net.SplitHostPort(*addr)
	if err != nil {
		panic(err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		panic(err)
	}
	web.BConfig.RunMode = web.PROD
	web.BConfig.Log.AccessLogs = false
	web.BConfig.CopyRequestBody = false
	web.BConfig.Listen.HTTPAddr = host
	web.BConfig.Listen.HTTPPort = port
	web.Get("/hello", hello)
	web.Get("/json", jsonHandler)
	web.Get("/io", io)
	web.Get("/db", dbHandler)
	web.Run()
}
