#pragma once
// shardctl's commands, one function each (docs/shardctl.md): the command's arguments in, the exit
// status out.

#include <QStringList>

namespace shardctl {

int run_demo_save(const QStringList& arguments);
int run_info(const QStringList& arguments);
int run_verify(const QStringList& arguments);
int run_load(const QStringList& arguments);
int run_plan_reshard(const QStringList& arguments);
int run_reshard(const QStringList& arguments);
int run_train(const QStringList& arguments);
int run_status(const QStringList& arguments);
int run_schedule(const QStringList& arguments);
int run_plan(const QStringList& arguments);
int run_profile(const QStringList& arguments);
int run_report(const QStringList& arguments);
int run_stats(const QStringList& arguments);
int run_diff(const QStringList& arguments);
int run_convert(const QStringList& arguments);

} // namespace shardctl
