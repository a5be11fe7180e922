use std::process::ExitCode;

use clap::Parser;

use shiftlab::cli::{completion, Cli, Command};
use shiftlab::commands;
use shiftlab::state::StateDir;

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SHIFTLAB_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .without_time()
        .init();
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let state = StateDir::resolve(cli.state_dir.as_deref());
    match &cli.command {
        Command::Plan(args) => commands::plan::run(args, &mut std::io::stdout().lock()),
        Command::Render(args) => commands::render::run(args, &state),
        Command::Create(cmd) => commands::create::run(cmd, &state),
        Command::WaitFor(cmd) => commands::wait_for::run(cmd, &state),
        Command::Destroy(cmd) => commands::destroy::destroy(cmd, &state),
        Command::List(args) => commands::list::list(args, &state, &mut std::io::stdout().lock()),
        Command::Status(args) => {
            commands::status::status(args, &state, &mut std::io::stdout().lock())
        }
        Command::ApproveCsrs(args) => {
            commands::approve_csrs::run(args, &state, &mut std::io::stdout().lock())
        }
        Command::Env(args) => commands::access::env(args, &state, &mut std::io::stdout().lock()),
        Command::Ssh(args) => commands::access::ssh(args, &state),
        Command::Console(args) => commands::access::console(args, &state),
        Command::Doctor(_) => unreachable!("doctor is run by main for its exit code"),
        Command::Gather(args) => commands::gather::run(args, &state, &mut std::io::stdout().lock()),
        Command::Stop(args) => commands::power::stop(args, &state, &mut std::io::stdout().lock()),
        Command::Start(args) => commands::power::start(args, &state, &mut std::io::stdout().lock()),
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
    init_logging(cli.verbose + u8::from(daemon));
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
    eprintln!("error: {e:#}");
    ExitCode::from(shiftlab::exit_status::code(&e))
}
