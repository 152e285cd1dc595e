#pragma once
// shardctl-mpi's commands: shardctl's flags and JSON, one MPI process per rank (or per P ranks).

#include "app/shardctl_mpi/mpijob.h"

#include <QCommandLineOption>
#include <QStringList>
#include <nlohmann/json.hpp>

namespace shardctl_mpi {

int run_demo_save(MpiJob& job, const QStringList& arguments);
int run_load(MpiJob& job, const QStringList& arguments);
int run_verify(MpiJob& job, const QStringList& arguments);
int run_reshard(MpiJob& job, const QStringList& arguments);
int run_train(MpiJob& job, const QStringList& arguments);
int run_stats(MpiJob& job, const QStringList& arguments);
int run_diff(MpiJob& job, const QStringList& arguments);

// Every process prints its own usage errors identically; only process 0 prints results.
void print_json_on_coordinator(const MpiJob& job, const nlohmann::json& object);
// --json and --threads as every shardctl-mpi command takes them (threads per process, default 1).
QCommandLineOption mpi_json_option();
QCommandLineOption mpi_threads_option();

} // namespace shardctl_mpi
