//! `xlens mcp`: the analyses as tools of a Model Context Protocol server over stdio, on the
//! official Rust SDK (`rmcp`), for agents.
//!
//! The protocol (handshake, framing, listing and calling tools) is the SDK's; this module adds
//! the tools ([`tools::TOOLS`], one entry per tool: the one place to change to add one), the
//! `--root` guard ([`guard`]), the profiles kept between calls ([`cache`]) and the 64 KiB page
//! of every result ([`page`]). A tool that fails, whatever the cause (bad arguments, a path
//! outside the roots, a profile that does not decode, a panic in an analysis), answers a tool
//! error of one line and the server goes on serving. The server reads only under its roots and
//! writes only into the `--out` directory given at start (nothing without one); stdout carries
//! the protocol alone.

mod cache;
mod guard;
mod page;
mod tools;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};

use super::commands::{EXIT_CODES, Job};

/// Serve the analyses as MCP tools over stdio (for agents: Claude Desktop, IDEs, any MCP client).
#[derive(Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct McpCmd {
    /// A directory the tools may read under (repeatable) [default: the working directory];
    /// paths outside every root, symlinks that lead out and URLs are refused.
    #[arg(long = "root", value_name = "DIR")]
    roots: Vec<PathBuf>,
    /// Memory kept for opened profiles and their results, in MiB (mapped files count at their
    /// size); the least recently used profiles are dropped first.
    #[arg(long, value_name = "MB", default_value_t = 4096)]
    cache_mb: u64,
    /// The one directory the tools may write into (created if missing): `scan`'s `html` page
    /// lands there. Without it the server writes nothing.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

impl Job for McpCmd {
    fn run(self) -> ExitCode {
        super::run(|| serve(&self))
    }
}

/// Serves on stdin/stdout until the client closes them.
fn serve(cmd: &McpCmd) -> anyhow::Result<()> {
    let roots = guard::Roots::new(&cmd.roots).map_err(anyhow::Error::msg)?;
    let out = guard::OutDir::new(cmd.out.as_deref()).map_err(anyhow::Error::msg)?;
    let state = Arc::new(tools::State::new(roots, out, cmd.cache_mb.saturating_mul(1 << 20)));
    // One thread for the protocol; each call runs on the blocking pool, and the analyses on
    // rayon's workers as in the CLI.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let running = Server { state }
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| anyhow::anyhow!("starting the MCP session: {e}"))?;
        running.waiting().await.map_err(|e| anyhow::anyhow!("serving MCP: {e}"))?;
        Ok(())
    })
}

/// An error and its causes, as one line (as the CLI prints them, without `error: `).
fn one_line(e: &(dyn std::error::Error + 'static)) -> String {
    let line = crate::report::tables::error_line(e);
    line.strip_prefix("error: ").unwrap_or(&line).to_owned()
}

/// The MCP server: the tools over the shared state.
#[derive(Clone, Debug)]
struct Server {
    state: Arc<tools::State>,
}

/// The protocol's description of `tool`.
fn described(
    name: &'static str,
    description: &'static str,
    schema: serde_json::Map<String, serde_json::Value>,
) -> Tool {
    Tool::new(name, description, schema)
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_instructions(
            "xlens analyses XProf profiles (*.xplane.pb, run directories, logdirs) offline. Start with `scan` on a \
             profile, then follow its findings: `findings` for one finding's evidence, `ops` for the op profile, \
             `hlo` for the programs, `kernels` on GPUs, `diff` to compare two runs, `device` for the hardware and key \
             figures, `memory` for programs' memory and the runtime memory profile, `events` for any timeline event. \
             Results over 64 KiB are paged: call again with `offset` = `page.next_offset`.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list().map(|(n, d, s)| described(n, d, s)).collect()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools::list().find(|(n, _, _)| *n == name).map(|(n, d, s)| described(n, d, s))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let state = self.state.clone();
        let name = request.name.to_string();
        let arguments = request.arguments.unwrap_or_default();
        let outcome = tokio::task::spawn_blocking(move || tools::call(&state, &name, arguments)).await;
        let result = match outcome {
            Ok(Ok(text)) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Ok(Err(line)) => CallToolResult::error(vec![ContentBlock::text(line)]),
            Err(e) => CallToolResult::error(vec![ContentBlock::text(format!("internal error in the tool: {e}"))]),
        };
        Ok(result.into())
    }
}
