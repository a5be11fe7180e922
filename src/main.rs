use std::process::ExitCode;

use clap::Parser;

use shiftlab::cli::{completion, Cli, Command};
use shiftlab::commands;
use shiftlab::state::StateDir;

/// The log filter: `SHIFTLAB_LOG` when set (over `-v`), else `-v`'s level. A
/// value tracing cannot read is an error, not a silent fallback to the default.
fn log_filter(verbose: u8) -> anyhow::Result<tracing_subscriber::EnvFilter> {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let Some(value) = std::env::var_os("SHIFTLAB_LOG").filter(|v| !v.is_empty()) else {
        return Ok(tracing_subscriber::EnvFilter::new(default));
    };
    const SYNTAX: &str =
        "valid: a level (error, warn, info, debug, trace, off) or comma-separated \
        TARGET=LEVEL directives, e.g. SHIFTLAB_LOG=debug or SHIFTLAB_LOG=warn,shiftlab=trace";
    let text = value
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("SHIFTLAB_LOG={value:?}: not UTF-8; {SYNTAX}"))?;
    tracing_subscriber::EnvFilter::builder()
        .parse(text)
        .map_err(|e| anyhow::anyhow!("SHIFTLAB_LOG={text:?}: {e}; {SYNTAX}"))
}

fn init_logging(filter: tracing_subscriber::EnvFilter) {
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(shiftlab::color::stderr())
        .with_target(false)
        .without_time()
        .init();
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let state = StateDir::resolve(cli.state_dir.as_deref());
    tracing::info!("state directory {}", state.root.display());
    match &cli.command {
        Command::Plan(args) => commands::plan::run(args, &mut std::io::stdout().lock()),
        Command::Render(args) => commands::render::run(args, &state),
        Command::Create(cmd) => commands::create::run(cmd, &state)
            .map_err(|e| commands::report::after_failed_create(cmd, &state, e))
            .and_then(|()| commands::report::after_create(cmd, &state)),
        Command::WaitFor(cmd) => commands::wait_for::run(cmd, &state),
        Command::Destroy(cmd) => commands::destroy::destroy(cmd, &state),
        Command::List(args) => commands::list::list(args, &state, &mut std::io::stdout().lock()),
        Command::Status(args) => {
            commands::status::status(args, &state, &mut std::io::stdout().lock())
        }
        Command::Report(args) => commands::report::run(args, &state, &mut std::io::stdout().lock()),
        Command::ApproveCsrs(args) => {
            commands::approve_csrs::run(args, &state, &mut std::io::stdout().lock())
        }
        Command::Users(args) => commands::users::run(args, &state, &mut std::io::stdout().lock()),
        Command::Env(args) => commands::access::env(args, &state, &mut std::io::stdout().lock()),
        Command::Ssh(args) => commands::access::ssh(args, &state),
        Command::Console(args) => commands::access::console(args, &state),
        Command::Doctor(_) => unreachable!("doctor is run by main for its exit code"),
        Command::Gather(args) => commands::gather::run(args, &state, &mut std::io::stdout().lock()),
        Command::Stop(args) => commands::power::stop(args, &state, &mut std::io::stdout().lock()),
        Command::Start(args) => commands::power::start(args, &state, &mut std::io::stdout().lock()),
        Command::Bundle(cmd) => commands::bundle::run(cmd, &state, &mut std::io::stdout().lock()),
        Command::Scale(args) => commands::scale::run(args, &state, &mut std::io::stdout().lock()),
        Command::Image(shiftlab::cli::image::ImageCommand::Standin(args)) => {
            if args.iso {
                shiftlab::image::standin::build_iso_for(&args.out, args.cpu_level)?;
            } else {
                shiftlab::image::standin::build_for(&args.out, args.cpu_level)?;
            }
            println!("wrote {}", args.out.display());
            Ok(())
        }
        Command::Serve(args) => commands::serve::run(args, &state),
        Command::Bmc(args) => commands::bmc::run(args, &state),
        Command::IronicStandin => commands::ironic_standin::run(),
        Command::Completion(args) => {
            completion::completion(args, &mut std::io::stdout().lock());
            Ok(())
        }
        Command::Man(args) => {
            for p in completion::write_man_pages(&args.out)? {
                println!("wrote {}", p.display());
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A daemon says what it serves; a one-shot command stays quiet unless asked.
    let daemon = match &cli.command {
        Command::Bmc(_) => true,
        Command::Serve(a) => a.action.is_none() && !a.install_unit,
        _ => false,
    };
    shiftlab::color::init(cli.color);
    match log_filter(cli.verbose + u8::from(daemon)) {
        Ok(filter) => init_logging(filter),
        // Bad usage, as a bad flag is.
        Err(e) => {
            eprintln!("{}: {e:#}", error_word());
            return ExitCode::from(shiftlab::exit_status::INVALID);
        }
    }
    if let Command::Doctor(args) = &cli.command {
        let state = StateDir::resolve(cli.state_dir.as_deref());
        return match commands::doctor::run(args, &state, &mut std::io::stdout().lock()) {
            Ok(code) => ExitCode::from(code),
            Err(e) => fail(e),
        };
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn fail(e: anyhow::Error) -> ExitCode {
    // One chain, outermost context first.
    eprintln!("{}: {e:#}", error_word());
    ExitCode::from(shiftlab::exit_status::code(&e))
}

/// "error", red where stderr is coloured.
fn error_word() -> String {
    shiftlab::color::paint(
        "error",
        shiftlab::color::Tone::Fail,
        shiftlab::color::stderr(),
    )
}
