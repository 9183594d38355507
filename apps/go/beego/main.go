// Beego (v2) with the same endpoints as every other stack.
//
//	bin/server -addr 127.0.0.1:8080
//
//	bin/server -addr 127.0.0.1:8080 -runmode dev
//
// RunMode is prod unless -runmode says dev (experiment 003 compared the two; conf/app.conf,
// which Beego reads from the working directory and warns about when it is missing, says
// prod, and the flag wins). Access logs are off. /io waits with time.Sleep, which parks
// only the goroutine; /db and /dbjson query MariaDB through database/sql (apps/go/dbquery);
// /_facts answers the run mode in effect, for `stackrace verify`.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
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

func dbJSONHandler(ctx *context.Context) {
	status, body := dbquery.RowResponse()
	if status == 200 {
		ctx.Output.Header("Content-Type", "application/json")
	} else {
		ctx.Output.Header("Content-Type", "text/plain")
	}
	ctx.Output.SetStatus(status)
	ctx.Output.Body(body)
}

// facts is what `stackrace verify` checks against the stack's `expect`: the run mode
// Beego really runs in, read from its own configuration after start-up.
func facts(ctx *context.Context) {
	body, _ := json.Marshal(map[string]string{"runmode": web.BConfig.RunMode})
	ctx.Output.Header("Content-Type", "application/json")
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
	runmode := flag.String("runmode", web.PROD, "Beego's run mode: prod or dev")
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
	if *runmode != web.PROD && *runmode != web.DEV {
		fmt.Fprintf(os.Stderr, "-runmode %q: use prod or dev\n", *runmode)
		os.Exit(2)
	}
	web.BConfig.RunMode = *runmode
	web.BConfig.Log.AccessLogs = false
	web.BConfig.CopyRequestBody = false
	web.BConfig.Listen.HTTPAddr = host
	web.BConfig.Listen.HTTPPort = port
	web.Get("/hello", hello)
	web.Get("/json", jsonHandler)
	web.Get("/io", io)
	web.Get("/db", dbHandler)
	web.Get("/dbjson", dbJSONHandler)
	web.Get("/_facts", facts)
	web.Run()
}
